"""Records where a real 3-node Apache Cassandra 5.0.4 cluster places keys.

Starts three Cassandra nodes on 127.0.0.1-3 (dc1: rack1, rack2, rack1), asks
each node's tokens and `nodetool getendpoints` for 40 keys under
SimpleStrategy RF 2 and NetworkTopologyStrategy {dc1: 2}, and writes
tests/golden/cassandra_placement.json. crates/cluster/tests/placement.rs
replays it: the same tokens and racks must give the same replicas in the
same order.

    .venv/bin/python tests/python/capture_cassandra_placement.py
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(ROOT, "..", "shared", "cassandra")
OUT = os.path.join(ROOT, "tests", "golden", "cassandra_placement.json")
NODETOOL_OUT = os.path.join(ROOT, "tests", "golden", "cassandra_nodetool")
RACKS = ["rack1", "rack2", "rack1"]


def main():
    base = tempfile.mkdtemp(prefix="cass-placement-")
    dirs = [os.path.join(base, f"c{i}") for i in (1, 2, 3)]
    try:
        for i, d in enumerate(dirs):
            subprocess.run([os.path.join(SHARED, "start.sh"), "--dir", d, "--address", f"127.0.0.{i + 1}",
                            "--seeds", "127.0.0.1", "--heap", "1G", "--port", "9043",
                            "--dc", "dc1", "--rack", RACKS[i]], check=True)
        from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
        from cassandra.policies import WhiteListRoundRobinPolicy
        # one coordinator for every query: system.local and system.peers
        # must describe the same node's view
        c = Cluster(["127.0.0.1"], port=9043, execution_profiles={
            EXEC_PROFILE_DEFAULT: ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.1"]))})
        s = c.connect()
        s.execute("CREATE KEYSPACE simple2 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        s.execute("CREATE KEYSPACE nts2 WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        for ks in ("simple2", "nts2"):
            s.execute(f"CREATE TABLE {ks}.t (k text PRIMARY KEY, v int)")
        nodes = []
        row = s.execute("SELECT broadcast_address, tokens, rack, data_center FROM system.local").one()
        nodes.append({"address": row.broadcast_address, "tokens": sorted(int(t) for t in row.tokens),
                      "rack": row.rack, "datacenter": row.data_center})
        for row in s.execute("SELECT peer, tokens, rack, data_center FROM system.peers"):
            nodes.append({"address": row.peer, "tokens": sorted(int(t) for t in row.tokens),
                          "rack": row.rack, "datacenter": row.data_center})
        nodes.sort(key=lambda n: n["address"])
        keys = [f"key{i}" for i in range(40)]
        placements = {}
        for ks in ("simple2", "nts2"):
            placements[ks] = {}
            for k in keys:
                out = subprocess.run([os.path.join(SHARED, "nodetool.sh"), "--dir", dirs[0], "getendpoints", ks, "t", k],
                                     check=True, capture_output=True, text=True).stdout
                placements[ks][k] = [l.strip() for l in out.splitlines() if l.strip()]
        token_of = {}
        for k in keys:
            s.execute("INSERT INTO simple2.t (k, v) VALUES (%s, 1)", (k,))
            token_of[k] = s.execute("SELECT token(k) FROM simple2.t WHERE k = %s", (k,)).one()[0]
        c.shutdown()
        # what Cassandra's nodetool prints for the cluster verbs, as golden
        # shapes for `sibyl nodetool` (host ids, loads and times differ)
        os.makedirs(NODETOOL_OUT, exist_ok=True)
        for verb in (["status"], ["status", "nts2"], ["ring"], ["describecluster"], ["gossipinfo"],
                     ["statusgossip"], ["version"], ["info"], ["getendpoints", "nts2", "t", "key1"]):
            out = subprocess.run([os.path.join(SHARED, "nodetool.sh"), "--dir", dirs[0], *verb],
                                 capture_output=True, text=True).stdout
            with open(os.path.join(NODETOOL_OUT, "_".join(verb) + ".txt"), "w") as f:
                f.write(out)
        with open(OUT, "w") as f:
            json.dump({
                "_about": "Replica placement of a real Apache Cassandra 5.0.4 cluster of 3 nodes (dc1: rack1, rack2, rack1), "
                          "num_tokens 16 with its allocator; `nodetool getendpoints` per key. Written by "
                          "tests/python/capture_cassandra_placement.py, replayed by crates/cluster/tests/placement.rs.",
                "nodes": nodes,
                "replication": {"simple2": {"class": "SimpleStrategy", "replication_factor": "2"},
                                "nts2": {"class": "NetworkTopologyStrategy", "dc1": "2"}},
                "keys": [{"key": k, "token": token_of[k]} for k in keys],
                "endpoints": placements,
            }, f, indent=1)
        print("wrote", OUT)
    finally:
        for d in dirs:
            subprocess.run([os.path.join(SHARED, "stop.sh"), "--dir", d], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())

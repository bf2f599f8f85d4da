"""Seed 003 §3.2 (issue 15): RF 1 vs RF 3 on a real 3-node Sibyl cluster
started by `sibyl cluster`, with 0, 1 and 2 nodes down, reads and writes at
ONE, QUORUM and ALL through node1: which succeed and which get Unavailable
(with its required / alive replicas) must be what a real Apache Cassandra
5.0.4 cluster answered, recorded per group in
tests/golden/cassandra_availability.json by
tests/python/capture_cassandra_availability.py (the same scenario code)."""
import json
import os
import time

from capture_cassandra_availability import (DOWN_ORDER, KEYS, KEYSPACES, create_schema, down_in_status,
                                            execution_profiles, group_record, group_sort_key, parse_endpoints,
                                            run_state, write_all_keys)
from local_cluster import cluster_factory, wait_for  # noqa: F401

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden",
                      "cassandra_availability.json")


def golden_groups():
    with open(GOLDEN) as f:
        golden = json.load(f)
    groups = {}
    for r in golden["groups"]:
        g = (r["keyspace"], r["operation"], r["consistency"], r["nodes_down"], r["replicas_down"])
        assert KEYSPACES[r["keyspace"]] == r["rf"]
        groups[g] = r["outcome"]
    return golden, groups


def test_rf1_and_rf3_with_nodes_down_succeed_or_are_unavailable_as_in_cassandra(cluster_factory):
    golden, expected = golden_groups()
    # ours go down as the golden's did: `stop` (graceful, DN within a
    # second) or `kill` (SIGKILL, DN after the failure detector's 25-40 s)
    method = golden["node_down_method"]
    assert method in ("stop", "kill")
    t0 = time.time()
    lc = cluster_factory(3)
    lc.run("start")
    addr = {n: f"127.0.0.{n}" for n in (1, 2, 3)}
    assert [addr[n] for n in DOWN_ORDER] == golden["down_order"]

    def status():
        return down_in_status(lc.nodetool("node1", "status"))

    wait_for("three nodes UN on node1", lambda: status() == {a: "UN" for a in addr.values()}, timeout=30)
    c, s = lc.connect(1, execution_profiles=execution_profiles())
    try:
        create_schema(s)
        write_all_keys(s)
        endpoints = {ks: {k: parse_endpoints(lc.nodetool("node1", "getendpoints", ks, "t", str(k))) for k in KEYS}
                     for ks in KEYSPACES}
        for ks, rf in KEYSPACES.items():
            for k in KEYS:
                assert len(endpoints[ks][k]) == rf, (ks, k, endpoints[ks][k])
        got = {}
        down = []
        for step in range(len(DOWN_ORDER) + 1):
            if step > 0:
                n = DOWN_ORDER[step - 1]
                lc.run(method, f"node{n}")
                down.append(addr[n])
                want = {a: ("DN" if a in down else "UN") for a in addr.values()}
                wait_for(f"{down} DN on node1", lambda: status() == want, timeout=30 if method == "stop" else 90,
                         every=0.5)
            # run_state asserts that every key of a group has one outcome
            got.update(run_state(s, endpoints, set(down), stamp=100 + step))
    finally:
        c.shutdown()
    took = time.time() - t0

    differences = []
    for g in sorted(set(got) | set(expected), key=group_sort_key):
        if g not in got:
            differences.append(f"{g}: no key of Sibyl's fell in this group; Cassandra: {expected[g]}")
        elif g not in expected:
            differences.append(f"{g}: not in the golden; Sibyl: {got[g][0]} (keys {got[g][1]})")
        elif got[g][0] != expected[g]:
            differences.append(f"{g}: Cassandra: {expected[g]}; Sibyl: {got[g][0]} (keys {got[g][1]})")
    assert not differences, "differences from Cassandra 5.0.4:\n" + "\n".join(differences)
    assert len(got) == len(expected) == 48, [group_record(g, got[g][0], got[g][1]) for g in got]
    assert took < (60 if method == "stop" else 150), f"the scenario took {took:.0f}s"

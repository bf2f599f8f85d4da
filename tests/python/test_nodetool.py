"""nodetool's command line and the admin interface it talks to (issue 18,
item 15): Cassandra's verbs, options, help and parse errors, `-F json|yaml`,
`enablebinary`/`disablebinary`, and a real HTTP/1.1 server behind it.

The Cassandra answers were recorded from Cassandra 5.0.4 (`nodetool.sh` of
../shared/cassandra) into tests/golden/cassandra_nodetool/."""
import http.client
import json
import re
import os
import socket
import subprocess
import time

import pytest
from cassandra.cluster import Cluster, NoHostAvailable

import goldens
from sibyl_node import BIN, SibylNode

GOLDEN = os.path.join(goldens.GOLDEN, "cassandra_nodetool")


def nodetool(n, *args):
    return subprocess.run([BIN, "nodetool", "-p", str(n.admin_port), *args],
                          capture_output=True, text=True, timeout=120)


def golden(name):
    with open(os.path.join(GOLDEN, name)) as f:
        return f.read()


@pytest.mark.parametrize("argv", sorted(json.loads(golden("parse_errors.json"))))
def test_parse_errors_and_help_are_cassandras(node, argv):
    """The same words, stream and exit status as Cassandra's nodetool. Only
    `status --bogus` differs: Cassandra takes an unknown option as the
    keyspace argument and fails on it at the node; Sibyl refuses it as an
    unexpected parameter, before reaching the node."""
    want = json.loads(golden("parse_errors.json"))[argv]
    p = nodetool(node, *argv.split())
    if argv == "status --bogus":
        assert p.returncode == 1
        assert p.stdout.startswith("nodetool: Found unexpected parameters: [--bogus]"), p.stdout
        return
    assert (p.stdout, p.returncode) == (want["stdout"], want["returncode"]), p.stderr


def test_verb_help_is_cassandras(node):
    p = nodetool(node, "help", "statusbinary")
    assert p.returncode == 0
    assert p.stdout == golden("help_statusbinary.txt")
    # every verb Sibyl lists has its help, and takes the options its help lists
    listing = nodetool(node, "help").stdout
    assert listing.startswith("usage: nodetool ")
    listed = listing.split("The most commonly used nodetool commands are:\n")[1].split("\n\n")[0]
    verbs = [l.split()[0] for l in listed.splitlines()]
    assert "repair" in verbs and "enablebinary" in verbs and len(verbs) >= 40
    for v in verbs:
        h = nodetool(node, "help", v)
        assert h.returncode == 0 and h.stdout.startswith(f"NAME\n        nodetool {v} - "), v
    # Cassandra's single-dash long names are taken (a repair of one keyspace)
    p = nodetool(node, "repair", "-pr", "-full", "-st", "-100", "-et", "100", "system_auth")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Repair completed successfully" in p.stdout
    # an option Cassandra has and Sibyl does not carry out is refused, named
    p = nodetool(node, "repair", "-tr", "system_auth")
    assert p.returncode == 1
    assert "Sibyl does not support repair -tr / --trace yet" in p.stdout


def shape(v):
    """A value's JSON type, as Cassandra's documents have them."""
    if v is None:
        return "null"
    return type(v).__name__


def test_tablestats_and_compactionhistory_print_cassandras_documents(node):
    c = Cluster([node.host], port=node.port)
    s = c.connect()
    s.execute("CREATE KEYSPACE ks1 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks1.t (k int PRIMARY KEY, v text)")
    s.execute("CREATE TABLE ks1.e (k int PRIMARY KEY, v text)")
    for i in range(100):
        s.execute("INSERT INTO ks1.t (k, v) VALUES (%s, 'x')", (i,))
    s.execute("SELECT * FROM ks1.t WHERE k = 1")
    c.shutdown()
    assert nodetool(node, "flush", "ks1").returncode == 0
    for i in range(2):
        # a second SSTable, so that compaction has something to merge
        s2 = Cluster([node.host], port=node.port).connect()
        s2.execute("INSERT INTO ks1.t (k, v) VALUES (%s, 'y')", (i,))
        s2.cluster.shutdown()
        assert nodetool(node, "flush", "ks1").returncode == 0
    assert nodetool(node, "compact", "ks1", "t").returncode == 0

    want = json.loads(golden("tablestats_F_json.json"))
    want_empty = json.loads(golden("tablestats_F_json_empty.json"))
    p = nodetool(node, "tablestats", "-F", "json", "ks1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert '"total_number_of_tables" : 2' in p.stdout, "Jackson's separator"
    got = json.loads(p.stdout)
    assert got["total_number_of_tables"] == 2
    ks, ks_want = got["ks1"], want["ks1"]
    # the keyspace's keys are Cassandra's, all of them, with Cassandra's types
    assert set(ks) == set(ks_want)
    for k in ks:
        if k != "tables":
            assert shape(ks[k]) == shape(ks_want[k]), k
    assert ks["write_count"] == 102 and ks["read_count"] == 1
    # a table's keys are some of Cassandra's, with its types; none is made up
    t, t_want = ks["tables"]["t"], ks_want["tables"]["t"]
    assert set(t) <= set(t_want), set(t) - set(t_want)
    assert len(t) >= 14
    for k in t:
        assert shape(t[k]) == shape(t_want[k]), k
    assert t["local_write_count"] == 102 and t["sstable_count"] == 1
    assert t["number_of_partitions_estimate"] == 100
    # a table that was never read nor written: NaN latencies, null averages
    e = ks["tables"]["e"]
    assert e["local_read_latency_ms"] == "NaN" == want_empty["ks2"]["tables"]["e"]["local_read_latency_ms"]
    p = nodetool(node, "tablestats", "-F", "json", "ks1.e")
    e_ks = json.loads(p.stdout)["ks1"]
    assert e_ks["read_latency_ms"] is None and e_ks["write_latency_ms"] is None
    assert want_empty["ks2"]["read_latency_ms"] is None
    # yaml is the same document
    y = nodetool(node, "tablestats", "-F", "yaml", "ks1")
    assert y.returncode == 0 and y.stdout.startswith("ks1:\n") and "  write_count: 102" in y.stdout

    h = nodetool(node, "compactionhistory", "-F", "json")
    assert h.returncode == 0, h.stdout + h.stderr
    rows = json.loads(h.stdout)["CompactionHistory"]
    cass = json.loads(golden("compactionhistory_F_json.json"))["CompactionHistory"][0]
    mine = [r for r in rows if r["keyspace_name"] == "ks1"]
    assert len(mine) == 1 and mine[0]["columnfamily_name"] == "t"
    assert set(mine[0]) <= set(cass)
    for k in mine[0]:
        assert shape(mine[0][k]) == shape(cass[k]), k
    assert len(mine[0]["compacted_at"]) == len(cass["compacted_at"])  # 2026-11-24T19:21:01.225


def test_disablebinary_closes_clients_out_and_enablebinary_lets_them_back():
    n = SibylNode().start()
    try:
        c = Cluster([n.host], port=n.port)
        s = c.connect()
        s.execute("SELECT release_version FROM system.local")
        assert nodetool(n, "statusbinary").stdout == "running\n"
        assert nodetool(n, "disablebinary").returncode == 0
        assert nodetool(n, "statusbinary").stdout == "not running\n"
        assert "Native Transport active: false" in nodetool(n, "info").stdout
        # nobody can connect, and the connections there were are closed
        with pytest.raises(OSError):
            socket.create_connection((n.host, n.port), timeout=2)
        with pytest.raises(NoHostAvailable):
            Cluster([n.host], port=n.port, connect_timeout=2).connect()
        # twice is harmless
        assert nodetool(n, "disablebinary").returncode == 0
        assert nodetool(n, "enablebinary").returncode == 0
        assert nodetool(n, "enablebinary").returncode == 0
        assert nodetool(n, "statusbinary").stdout == "running\n"
        assert "Native Transport active: true" in nodetool(n, "info").stdout
        # the driver's session reconnects by itself
        deadline = time.time() + 30
        while True:
            try:
                s.execute("SELECT release_version FROM system.local")
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        c.shutdown()
    finally:
        n.stop()


def test_the_admin_interface_speaks_http_1_1(node):
    """Keep-alive, percent-decoding, a bad request answered 400, and a client
    that sends nothing dropped (it used to be a hand-written loop)."""
    conn = http.client.HTTPConnection(node.host, node.admin_port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/binary")
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("content-type") == "application/json"
        assert json.loads(r.read()) == {"running": True}
    conn.request("GET", "/tablestats?keyspace=no%20such")
    r = conn.getresponse()
    assert r.status == 404
    assert json.loads(r.read())["error"] == "Keyspace [no such] does not exist."
    conn.close()
    # garbage is a 400, and the node goes on
    raw = socket.create_connection((node.host, node.admin_port), timeout=10)
    raw.sendall(b"\x00\x01 NOT HTTP\r\n\r\n")
    assert raw.recv(100).startswith(b"HTTP/1.1 400")
    raw.close()
    # a client that connects and says nothing is dropped after 10 s
    idle = socket.create_connection((node.host, node.admin_port), timeout=30)
    t0 = time.time()
    try:
        data = idle.recv(100)
    except ConnectionResetError:
        data = b""
    assert data == b"" or data.startswith(b"HTTP/1.1 408"), data
    assert 5 < time.time() - t0 < 25
    assert nodetool(node, "statusbinary").stdout == "running\n"


def test_disablegossip_marks_the_node_down_for_the_others_and_enablegossip_brings_it_back(tmp_path):
    """As Cassandra's: the node says it is shutting down and stops
    gossiping, but serves its clients; `enablegossip` starts again with a
    newer generation, and the others take it back."""
    from local_cluster import LocalCluster, status_lines, wait_for
    lc = LocalCluster(tmp_path, 2)
    try:
        lc.run("start")
        wait_for("both up", lambda: sum(l.startswith("UN") for l in status_lines(lc.nodetool(1, "status"))) == 2)
        gen = int(re.search(r"Generation No\s*: (\d+)", lc.nodetool(2, "info")).group(1))
        lc.nodetool(2, "disablegossip")
        assert lc.nodetool(2, "statusgossip") == "not running\n"
        assert re.search(r"Gossip active\s*: false", lc.nodetool(2, "info"))
        wait_for("node 2 down in node 1's view",
                 lambda: any(l.startswith("DN") and "127.0.0.2" in l for l in status_lines(lc.nodetool(1, "status"))),
                 timeout=30)
        # node 2 still serves its clients
        c, s = lc.connect(2, whitelist=True)
        assert s.execute("SELECT release_version FROM system.local").one()
        c.shutdown()
        lc.nodetool(2, "enablegossip")
        assert lc.nodetool(2, "statusgossip") == "running\n"
        info = lc.nodetool(2, "info")
        assert re.search(r"Gossip active\s*: true", info)
        assert int(re.search(r"Generation No\s*: (\d+)", info).group(1)) > gen
        wait_for("node 2 up again in node 1's view",
                 lambda: sum(l.startswith("UN") for l in status_lines(lc.nodetool(1, "status"))) == 2,
                 timeout=30)
    finally:
        lc.stop()


def test_tpstats_prints_cassandras_tables_and_documents(node, session):
    """Issue 21, item 6: `tpstats` in Cassandra 5.0.4's layout (golden
    `tpstats.txt`: the same headers, column padding and "N/A" where a latency
    is not measured) and its `-F json` document with Cassandra's keys
    (`tpstats_F_json.json`). The counts are real: a write moves
    Native-Transport-Requests' completed count."""
    def pools(text):
        head, _, rest = text.partition("\nLatencies waiting in queue (micros) per dropped message types\n")
        return head.splitlines(), rest.splitlines()

    want_pools, want_dropped = pools(golden("tpstats.txt"))
    before = nodetool(node, "tpstats")
    assert before.returncode == 0, before.stderr
    got_pools, got_dropped = pools(before.stdout)
    assert got_pools[0].split() == want_pools[0].split()
    # the first column is as wide as the longest verb name, which differs
    rest = lambda h: re.sub(r"^Message type +", "", h)
    assert rest(got_dropped[0]) == rest(want_dropped[0]), (got_dropped[0], want_dropped[0])
    # each column as wide as its widest cell plus one space, as TableBuilder pads
    for rows, cells in ((got_pools, ["Active", "Pending", "Completed", "Blocked", "All time blocked"]),
                        (got_dropped, ["Dropped", "50%", "95%", "99%", "Max"])):
        starts = [rows[0].index(c) for c in cells]
        for r in rows[1:]:
            assert all(r[i - 1] == " " and r[i] != " " for i in starts), (rows[0], r)
    names = {l.split()[0] for l in got_pools[1:]}
    assert {"ReadStage", "MutationStage", "Native-Transport-Requests", "CompactionExecutor",
            "MemtableFlushWriter", "GossipStage", "HintsDispatcher"} <= names
    assert names <= {l.split()[0] for l in want_pools[1:]} | {"MutationStage", "CounterMutationStage",
                                                              "RequestResponseStage", "AntiEntropyStage"}
    assert any(l.split()[0] == "MUTATION_REQ" and l.split()[2:] == ["N/A"] * 4 for l in got_dropped[1:])
    completed = lambda text: int(next(l.split()[3] for l in text.splitlines()
                                     if l.startswith("Native-Transport-Requests ")))
    session.execute("CREATE KEYSPACE IF NOT EXISTS tp WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    for _ in range(5):
        session.execute("SELECT release_version FROM system.local")
    assert completed(nodetool(node, "tpstats").stdout) >= completed(before.stdout) + 6
    doc = json.loads(nodetool(node, "tpstats", "-F", "json").stdout)
    want = json.loads(golden("tpstats_F_json.json"))
    assert set(doc) == set(want)
    assert set(doc["ThreadPools"]["ReadStage"]) == set(want["ThreadPools"]["ReadStage"])
    assert all(isinstance(v, int) for v in doc["ThreadPools"]["ReadStage"].values())
    assert isinstance(doc["DroppedMessage"]["MUTATION_REQ"], int)


def test_proxyhistograms_prints_cassandras_table(node, session):
    """Issue 21, item 6: `proxyhistograms` in Cassandra 5.0.4's layout
    (golden `proxyhistograms.txt`), from the coordinator's latencies: the
    columns of the operations that ran are filled, the others read 0."""
    want = golden("proxyhistograms.txt").splitlines()
    session.execute("CREATE TABLE ph (k int PRIMARY KEY, v int)")
    for i in range(10):
        session.execute("INSERT INTO ph (k, v) VALUES (%s, %s)", (i, i))
        session.execute("SELECT * FROM ph WHERE k = %s", (i,))
    session.execute("UPDATE ph SET v = 1 WHERE k = 1 IF v = 1")
    p = nodetool(node, "proxyhistograms")
    assert p.returncode == 0, p.stderr
    got = p.stdout.splitlines()
    assert got[:3] == want[:3]
    assert [l.split()[0] for l in got[3:10]] == [l.split()[0] for l in want[3:10]]
    assert got[10:] == want[10:] == [""]
    rows = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in got[3:10]}
    for label, cells in rows.items():
        assert all(re.fullmatch(r"\d+\.\d\d", x) for x in got[3 + list(rows).index(label)].split()[1:])
        # the columns line up under the headers, right-aligned in 19 characters
        assert len(got[3 + list(rows).index(label)]) == len(want[1])
    read, write, rng, cas_read, cas_write, view = zip(*rows.values())
    assert min(read) > 0 and min(write) > 0 and max(cas_write) > 0
    assert rows["Min"][0] <= rows["50%"][0] <= rows["99%"][0] <= rows["Max"][0]
    assert set(view) == {0.0}



def test_netstats_prints_cassandras_sections_and_message_pools(node):
    """Cassandra 5.0.4's NetStats layout: the mode, the streams (none here),
    the read repair figures, then the messaging pools as
    "%-25s%10s%10s%15s%10s" (Active is n/a in Cassandra too)."""
    if not hasattr(node, "nodetool"):
        pytest.skip("needs a local node")
    lines = node.nodetool("netstats").splitlines()
    assert lines[0] == "Mode: NORMAL"
    assert lines[1] == "Not sending any streams."
    assert lines[2:4] == ["Read Repair Statistics:", lines[3]] and lines[3].startswith("Attempted: ")
    assert lines[4].startswith("Mismatch (Blocking): ") and lines[5] == "Mismatch (Background): 0"
    assert lines[6] == "%-25s%10s%10s%15s%10s" % ("Pool Name", "Active", "Pending", "Completed", "Dropped")
    names = [l[:25].rstrip() for l in lines[7:]]
    assert names == ["Large messages", "Small messages", "Gossip messages"]
    for l in lines[7:]:
        assert len(l) == 70 and l[25:35].strip() == "n/a"
        assert all(f.isdigit() for f in l[35:].split())


def test_stream_throughput_verbs_answer_as_cassandras(node):
    """set/get[interdc]streamthroughput with and without -m and -d: the same
    output and exit status as Cassandra 5.0.4's nodetool for the same
    sequence (golden stream_throughput.txt, its Java stack frames and blank
    lines left out), its quirks included: a rate that is not a whole number
    of megabits needs -d, `getinterdcstreamthroughput` prints the rate as a
    double before its line, and a rate must be a Java int."""
    blocks = golden("stream_throughput.txt").split("== ")[1:]
    for block in blocks:
        cmd, rest = block.split("\n", 1)
        want_out, want_rc = rest.rsplit("[rc=", 1)
        p = subprocess.run([BIN, "nodetool", "-p", str(node.admin_port), *cmd.split()],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        got = "".join(l + "\n" for l in p.stdout.splitlines() if l.strip() and not re.match(r"^\s*at ", l))
        assert (got, p.returncode) == (want_out, int(want_rc.split("]")[0])), cmd

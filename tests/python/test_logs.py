"""Issue 21, item 2: system.log and debug.log where an operator looks for
them, with the lines operators and their alerting watch for in Cassandra's
words and layout. tests/golden/cassandra_system_log_lines.txt holds those
lines from a Cassandra 5.0.4 cluster's system.log (3 nodes on 127.0.0.1-3,
storage port 7100, CQL port 9043, one node killed and started again)."""
import os
import re

import goldens
from local_cluster import LocalCluster, wait_for

LAYOUT = r"^(INFO |WARN |ERROR|DEBUG) \[[^\]]+\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \S+:\d+ - "


def cassandra_lines():
    """The golden lines' messages, with Cassandra's ports as placeholders."""
    out = []
    with open(os.path.join(goldens.GOLDEN, "cassandra_system_log_lines.txt")) as f:
        for line in f:
            assert re.match(LAYOUT.replace(r"\S+:\d+", r"\S+\.java:\d+"), line), line
            out.append(line.split(" - ", 1)[1].rstrip("\n").replace(":7100", ":{storage}").replace(":9043", ":{native}"))
    return out


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def test_system_log_says_what_cassandras_says_when_a_node_goes_down_and_comes_back(tmp_path):
    lc = LocalCluster(tmp_path, 3)
    try:
        lc.run("start")
        logs = os.path.join(lc.dir, "node1", "data", "logs")
        system = os.path.join(logs, "system.log")
        ports = {"storage": lc.storage_port, "native": lc.port}
        want = {m.format(**ports) for m in cassandra_lines()}
        # the lines of a start and of the others joining
        for m in ("Starting listening for CQL clients on /127.0.0.1:{native} (unencrypted)...",
                  "Node /127.0.0.2:{storage} is now part of the cluster",
                  "InetAddress /127.0.0.2:{storage} is now UP"):
            line = m.format(**ports)
            assert line in want, line
            wait_for(line, lambda: line in read(system), timeout=30)
        lc.run("kill", "node3")
        down = f"InetAddress /127.0.0.3:{lc.storage_port} is now DOWN"
        assert down in want
        wait_for("node 3 DOWN in node 1's system.log", lambda: down in read(system), timeout=60)
        lc.run("start", "node3")
        up = re.compile(rf"(InetAddress /127\.0\.0\.3:{lc.storage_port} is now UP|Node /127\.0\.0\.3:{lc.storage_port} has restarted, now UP)")
        wait_for("node 3 UP again", lambda: len(up.findall(read(system))) >= 2, timeout=60)
        # every line in Cassandra's layout: level, [thread], date, file:line - message
        text = read(system)
        for line in text.splitlines():
            assert re.match(LAYOUT, line), line
        (line,) = [l for l in text.splitlines() if l.endswith(down)]
        assert line.startswith("INFO  [")
        # debug.log beside it, with everything system.log has
        debug = read(os.path.join(logs, "debug.log"))
        assert down in debug
        # a node stopping says so, as Cassandra's does
        lc.run("stop", "node2")
        wait_for("shutdown announced", lambda: "Announcing shutdown" in read(os.path.join(lc.dir, "node2", "data", "logs", "system.log")))
        assert "Announcing shutdown" in want
    finally:
        lc.stop()


def test_logging_levels_are_read_and_changed_at_run_time_as_with_nodetool(tmp_path):
    """`nodetool getlogginglevels` in Cassandra's layout ("%n%-50s%10s%n"),
    and `setlogginglevel` changing what reaches the files at once; with no
    arguments, back to the levels the node started with."""
    import subprocess
    import time
    from sibyl_node import BIN, SibylNode
    n = SibylNode().start()
    logs = os.path.join(n.data_dir, "logs")
    system = os.path.join(logs, "system.log")

    def nt(*args):
        p = subprocess.run([BIN, "nodetool", "-p", str(n.admin_port), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    try:
        out = nt("getlogginglevels")
        assert out.startswith("\nLogger Name                                        Log Level\n"), out
        assert "ROOT                                                    INFO\n" in out
        nt("setlogginglevel", "sibyl_node::native", "ERROR")
        assert f"{'sibyl_node::native':<50}{'ERROR':>10}\n" in nt("getlogginglevels")
        nt("disablebinary")
        nt("enablebinary")
        time.sleep(1)
        assert "Stop listening for CQL clients" not in read(system)
        # a level that does not exist is refused
        p = subprocess.run([BIN, "nodetool", "-p", str(n.admin_port), "setlogginglevel", "sibyl", "LOUD"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and "Unknown level LOUD" in p.stdout + p.stderr
        # no arguments: the initial levels again
        nt("setlogginglevel")
        assert "sibyl_node::native" not in nt("getlogginglevels")
        nt("disablebinary")
        wait_for("the line logged again", lambda: "Stop listening for CQL clients" in read(system))
        nt("enablebinary")
    finally:
        n.stop()


def test_a_paused_node_shows_in_gcstats_gc_log_and_system_log(tmp_path):
    """Sibyl has no garbage collector; its pauses are the times it could not
    run (Cassandra's GCInspector counterpart): a process stopped for a while,
    as a VM or swap stall does, is one. `nodetool gcstats` prints them in
    Cassandra's layout and resets them; gc.log lists every one; system.log
    the long ones."""
    import signal
    import time
    from sibyl_node import SibylNode
    node = SibylNode(data_dir=str(tmp_path)).start()
    try:
        header = ("%20s%20s%20s%20s%20s%20s%25s" % (
            "Interval (ms)", "Max GC Elapsed (ms)", "Total GC Elapsed (ms)", "Stdev GC Elapsed (ms)",
            "GC Reclaimed (MB)", "Collections", "Direct Memory Bytes"))
        node.nodetool("gcstats")  # a new interval from here
        node.proc.send_signal(signal.SIGSTOP)
        time.sleep(0.6)
        node.proc.send_signal(signal.SIGCONT)
        logs = os.path.join(str(tmp_path), "logs")
        wait_for("the pause in gc.log",
                 lambda: re.search(r"Event loop paused for \d+ ms", read(os.path.join(logs, "gc.log"))), timeout=10)
        lines = node.nodetool("gcstats").splitlines()
        assert lines[0] == header
        fields = lines[1].split()
        assert len(lines[1]) == 20 * 6 + 25 and len(fields) == 7
        interval, max_ms, total, stdev, reclaimed, count, direct = fields
        assert int(count) >= 1 and int(max_ms) >= 400 and int(total) >= int(max_ms)
        assert int(interval) >= int(max_ms) and int(reclaimed) == 0 and int(direct) == -1
        # read and reset: the next interval starts empty, as Cassandra's
        again = node.nodetool("gcstats").splitlines()[1].split()
        assert again[3] == "NaN" or int(again[5]) < int(count)
        system = read(os.path.join(logs, "system.log"))
        line = next(l for l in system.splitlines() if "Event loop paused for" in l)
        assert re.match(LAYOUT, line) and line.startswith("INFO ")
        # gc.log lines stay out of system.log's stream of their own: every
        # pause line of debug.log is one of system.log's (a loaded machine
        # may add a pause of its own, logged to both; system.log is read
        # after debug.log, so that it holds every line debug.log does)

        def pause_lines(name):
            return [l for l in read(os.path.join(logs, name)).splitlines() if "Event loop paused" in l]

        def only_in_debug():
            debug = pause_lines("debug.log")
            system = set(pause_lines("system.log"))
            return [l for l in debug if l not in system]
        wait_for("debug.log's pause lines in system.log too", lambda: not only_in_debug(), timeout=5)
        assert line in pause_lines("debug.log")
    finally:
        node.stop()


def shape(message):
    """A log message with its paths, ids and numbers replaced by
    placeholders: what must match Cassandra's line word for word."""
    message = re.sub(r"(?<=[\s\[])/[^\s,\]\)]+", "PATH", message)
    message = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "ID", message)
    return re.sub(r"-?\d+(,\d{3})*(\.\d+)?", "N", message)


def test_flush_and_compaction_lines_are_cassandras(tmp_path):
    """A user flush and a major compaction log the lines Cassandra 5.0.4
    logs (tests/golden/cassandra_flush_compaction_log_lines.txt, from a
    real node flushing and compacting cs.t): the same words, sizes in
    Cassandra's units, only paths, ids and figures differ."""
    from cassandra.cluster import Cluster
    from sibyl_node import SibylNode
    with open(os.path.join(goldens.GOLDEN, "cassandra_flush_compaction_log_lines.txt")) as f:
        golden = [line.split(" - ", 1)[1].rstrip("\n") for line in f]
    n = SibylNode().start()
    try:
        c = Cluster(["127.0.0.1"], port=n.port)
        s = c.connect()
        s.execute("CREATE KEYSPACE cs WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE cs.t (k int PRIMARY KEY, v blob)")
        insert = s.prepare("INSERT INTO cs.t (k, v) VALUES (?, ?)")
        for part in range(2):
            for k in range(part * 2000, part * 2000 + 2000):
                s.execute(insert, (k, os.urandom(1000)))
            n.nodetool("flush", "cs", "t")
        n.nodetool("compact", "cs", "t")
        c.shutdown()
        system = os.path.join(n.data_dir, "logs", "system.log")
        for want in golden:
            prefix = re.match(r"\S+ [A-Za-z]*", want).group(0)
            mine = [l.split(" - ", 1)[1] for l in read(system).splitlines()
                    if " - " in l and l.split(" - ", 1)[1].startswith(prefix)
                    and ("/cs/" in l or "cs.t," in l or "Memtable-t@" in l)]
            assert mine, f"no line like {want!r} in system.log"
            assert shape(mine[-1]) == shape(want), (mine[-1], want)
    finally:
        n.stop()

"""The built-in dashboard (issue 21, item 10): on the admin port of any node,
the cluster's nodes with their state, load, request rates, p99s, timeouts,
pending compactions, hint files and dropped messages. Loaded in a real
headless chromium while a node is killed: the killed node shows DN, the
others UN with their figures, and the page draws (a screenshot)."""
import json
import re
import shutil
import subprocess
import urllib.request

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

from local_cluster import LocalCluster, wait_for


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def browse(url, *args):
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=8000", *args, url],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not chromium(), reason="no chromium (scripts/test.sh installs it where apt-get works)")
def test_dashboard_shows_every_node_and_a_killed_one_as_down(tmp_path):
    c = LocalCluster(tmp_path, 3)
    try:
        c.run("start")
        wait_for("three nodes up", lambda: c.nodetool(1, "status").count("UN  127.0.0.") == 3)
        cl, s = c.connect(1, whitelist=True)
        s.execute("CREATE KEYSPACE d WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE d.t (k int PRIMARY KEY, v int)")
        for k in range(200):
            s.execute(SimpleStatement("INSERT INTO d.t (k, v) VALUES (%s, %s)",
                                      consistency_level=ConsistencyLevel.QUORUM), (k, k))
        cl.shutdown()
        page = f"http://127.0.0.1:{c.admin_port}/dashboard"
        ctype, html = get(page)
        assert ctype.startswith("text/html") and "<table" in html
        # any node answers for the whole cluster, each node's own figures included
        _, data = get(f"http://127.0.0.2:{c.admin_port}/dashboard/data")
        d = json.loads(data)
        assert d["served_by"] == "127.0.0.2"
        assert sorted(n["address"] for n in d["nodes"]) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
        assert all(n["status"] == "UP" and n["state"] == "NORMAL" and n["figures"] for n in d["nodes"])
        by = {n["address"]: n for n in d["nodes"]}
        assert by["127.0.0.1"]["figures"]["writes_per_second"] > 0
        assert by["127.0.0.1"]["figures"]["write_p99_ms"] > 0
        for key in ("timeouts", "pending_compactions", "hints", "dropped", "reads_per_second", "read_p99_ms"):
            assert key in by["127.0.0.3"]["figures"]

        c.run("kill", "node3")
        wait_for("node 3 DOWN for node 1", lambda: "DN  127.0.0.3" in c.nodetool(1, "status"))
        p = browse(page, "--dump-dom")
        assert p.returncode == 0, p.stderr[-2000:]
        rows = re.findall(r'<tr data-address="([0-9.]+)"[^>]*>(.*?)</tr>', p.stdout, re.S)
        cells = {addr: re.findall(r"<td[^>]*>(.*?)</td>", row) for addr, row in rows}
        assert sorted(cells) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"], p.stdout[-3000:]
        assert cells["127.0.0.3"][0] == "DN" and cells["127.0.0.1"][0] == "UN" and cells["127.0.0.2"][0] == "UN"
        # a down node's figures cannot be read: shown as dashes, not as zeros
        assert set(cells["127.0.0.3"][5:]) == {"–"}
        assert float(cells["127.0.0.1"][6]) > 0, "writes per second"
        shot = tmp_path / "dashboard.png"
        browse(page, f"--screenshot={shot}", "--window-size=1400,600")
        assert shot.exists() and shot.stat().st_size > 10_000
    finally:
        c.stop()

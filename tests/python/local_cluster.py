"""A local cluster of real `sibyl` processes on 127.0.0.x, laid out and
driven by `sibyl cluster` (the launcher users have), for the multi-node
tests."""
import json
import os
import re
import subprocess
import time
import urllib.request

import pytest
from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import WhiteListRoundRobinPolicy

from sibyl_node import BIN, free_port


class LocalCluster:
    """A cluster laid out by `sibyl cluster create` in its own directory."""

    def __init__(self, tmp_path, nodes, dcs=1, racks=1, extra=()):
        self.dir = str(tmp_path / "cluster")
        self.port = free_port()
        self.admin_port = free_port()
        self.storage_port = free_port()
        self.run("create", "--nodes", str(nodes), "--port", str(self.port), "--admin-port", str(self.admin_port),
                 "--storage-port", str(self.storage_port), "--dcs", str(dcs), "--racks", str(racks),
                 "--", "commitlog_sync=batch", *extra)

    def run(self, *args, check=True, timeout=180):
        p = subprocess.run([BIN, "cluster", args[0], "--dir", self.dir, *args[1:]], capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError(f"sibyl cluster {' '.join(args)}: {p.stdout}{p.stderr}{self.logs()}")
        return p

    def nodetool(self, node, *args, check=True):
        if isinstance(node, int):
            node = f"node{node}"
        p = self.run("nodetool", node, *args, check=check)
        return p.stdout if check else p

    def admin(self, node, path):
        url = f"http://127.0.0.{node}:{self.admin_port}{path}"
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())

    def logs(self):
        out = ""
        for d in sorted(os.listdir(self.dir)):
            log = os.path.join(self.dir, d, "sibyl.log")
            if os.path.exists(log):
                with open(log) as f:
                    out += f"\n--- {d}\n" + "".join(f.readlines()[-30:])
        return out

    def connect(self, node=1, whitelist=False, **kw):
        if whitelist:
            kw["execution_profiles"] = {EXEC_PROFILE_DEFAULT: ExecutionProfile(
                load_balancing_policy=WhiteListRoundRobinPolicy([f"127.0.0.{node}"]), request_timeout=30)}
        c = Cluster([f"127.0.0.{node}"], port=self.port, **kw)
        return c, c.connect()

    def stop(self):
        self.run("stop", check=False)


@pytest.fixture
def cluster_factory(tmp_path):
    made = []

    def make(*args, **kw):
        c = LocalCluster(tmp_path, *args, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def status_lines(out):
    return [l for l in out.splitlines() if re.match(r"^[UD][NLJM] ", l)]


def wait_for(what, f, timeout=60, every=0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = f()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")

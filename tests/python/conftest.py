"""Test harness: one server for the whole session, a fresh keyspace per test.

With SIBYL_TARGET=host:port the tests run against that server (e.g. Apache
Cassandra 5.0.4 on 127.0.0.1:9043, the oracle these tests are checked
against); tests marked `restart` or `own_node` are then skipped. Otherwise a
`sibyl` process (SIBYL_BIN, default <repo>/target/debug/sibyl) is started on
a free port with a temporary data directory and stopped at the end.
"""
import os
import shutil
import subprocess
import sys
import uuid

import pytest
from cassandra.cluster import Cluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goldens  # noqa: E402
from sibyl_node import RemoteNode, SibylNode  # noqa: E402

TARGET = os.environ.get("SIBYL_TARGET")


def pytest_configure(config):
    config.addinivalue_line("markers", "restart: kills or restarts the node (skipped under SIBYL_TARGET)")
    config.addinivalue_line("markers", "own_node: starts sibyl processes of its own (skipped under SIBYL_TARGET)")


def pytest_collection_modifyitems(config, items):
    if not TARGET:
        return
    skip = pytest.mark.skip(reason="SIBYL_TARGET is set: this test kills, restarts or starts sibyl processes")
    for item in items:
        if "restart" in item.keywords or "own_node" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def node():
    """The server under test: .host, .port, .data_dir, .kill9(), .start(), .restart()."""
    if TARGET:
        host, port = TARGET.rsplit(":", 1)
        yield RemoteNode(host, int(port))
        return
    n = SibylNode().start()
    yield n
    n.stop()  # SIGTERM, then SIGKILL after a grace period
    shutil.rmtree(n.data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(node):
    c = Cluster(contact_points=[node.host], port=node.port)
    yield c
    c.shutdown()


def new_keyspace_name():
    return "ks_" + uuid.uuid4().hex[:12]


@pytest.fixture()
def session(cluster):
    """A session whose keyspace is a fresh SimpleStrategy rf 1 keyspace, dropped after the test."""
    s = cluster.connect()
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.set_keyspace(ks)
    s.keyspace_name = ks
    yield s
    s.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    s.shutdown()


@pytest.fixture()
def make_cluster(node):
    """Builds extra Cluster objects against the node; all are shut down after the test."""
    made = []

    def make(**kwargs):
        c = Cluster(contact_points=[node.host], port=node.port, **kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.shutdown()


class Cqlsh:
    """Runs the PyPI cqlsh of this virtualenv against the node."""

    def __init__(self, node):
        self.node = node
        self.bin = os.path.join(os.path.dirname(sys.executable), "cqlsh")
        if not os.path.exists(self.bin):
            self.bin = shutil.which("cqlsh") or self.bin

    def run(self, *args, stdin=None, timeout=120):
        """Returns a CompletedProcess with .stdout, .stderr and .returncode."""
        return subprocess.run(
            [self.bin, self.node.host, str(self.node.port), *args],
            capture_output=True, text=True, input=stdin, timeout=timeout, env=goldens.cqlsh_env(),
        )

    def e(self, statements):
        return self.run("-e", statements)

    def f(self, path):
        return self.run("-f", str(path))


@pytest.fixture()
def cqlsh(node):
    return Cqlsh(node)

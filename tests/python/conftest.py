import os
import shutil
import subprocess
import sys
import uuid

import pytest
from cassandra.cluster import Cluster

sys.path.insert(0, os.path.dirname(__file__))
from sibyl_node import SibylNode  # noqa: E402

TARGET = os.environ.get("SIBYL_TARGET")  # host:port of an already running server (e.g. Cassandra)


@pytest.fixture(scope="session")
def node():
    if TARGET:
        host, port = TARGET.split(":")
        n = SibylNode(port=int(port))
        n.host = host
        yield n
        return
    n = SibylNode().start()
    yield n
    n.stop()
    shutil.rmtree(n.data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster(node):
    c = Cluster([node.host], port=node.port)
    yield c
    c.shutdown()


@pytest.fixture()
def session(cluster):
    s = cluster.connect()
    ks = "ks_" + uuid.uuid4().hex[:12]
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.set_keyspace(ks)
    s.keyspace_name = ks
    yield s
    s.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    s.shutdown()


@pytest.fixture()
def fresh_node():
    """A node of its own, for tests that kill and restart it."""
    if TARGET:
        pytest.skip("restart tests need a sibyl process of their own")
    n = SibylNode().start()
    yield n
    n.kill9()
    shutil.rmtree(n.data_dir, ignore_errors=True)


class Cqlsh:
    def __init__(self, node):
        self.node = node
        self.bin = os.path.join(os.path.dirname(sys.executable), "cqlsh")

    def run(self, *args, stdin=None):
        p = subprocess.run(
            [self.bin, self.node.host, str(self.node.port), *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=60,
        )
        return p

    def e(self, statement):
        return self.run("-e", statement)


@pytest.fixture()
def cqlsh(node):
    return Cqlsh(node)

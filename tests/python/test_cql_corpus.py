"""Replays the CQL corpus (answers recorded from Cassandra 5.0.4) against Sibyl."""
import difflib
import os

import pytest
from cassandra.cluster import Cluster

import cql_corpus

FILES = sorted(f for f in os.listdir(cql_corpus.CORPUS) if f.endswith(".cql"))


@pytest.fixture(scope="module")
def v5_session(node):
    c = Cluster([node.host], port=node.port, protocol_version=5)
    s = c.connect()
    yield s
    c.shutdown()


@pytest.mark.parametrize("name", FILES)
def test_corpus_matches_cassandra(v5_session, name):
    path = os.path.join(cql_corpus.CORPUS, name)
    got = cql_corpus.run_file(v5_session, path)
    with open(path[:-4] + ".expected") as f:
        exp = f.read()
    if got != exp:
        diff = "".join(difflib.unified_diff(exp.splitlines(True), got.splitlines(True), "cassandra", "sibyl"))
        pytest.fail(diff)

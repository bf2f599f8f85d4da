"""Connecting, driver metadata and the system tables drivers read."""
import pytest
from cassandra.cluster import Cluster

import goldens

SYSTEM_TABLES = goldens.load_json("system_tables.json")


def test_driver_connects_and_runs_a_query(node):
    c = Cluster(contact_points=[node.host], port=node.port)
    try:
        s = c.connect()
        assert s.execute("SELECT key FROM system.local").one().key == "local"
        assert c.protocol_version in (4, 5)
        assert [h.endpoint.port for h in c.metadata.all_hosts()] == [node.port]
    finally:
        c.shutdown()


def test_metadata_shows_keyspace_table_columns_and_keys(session, cluster):
    ks = session.keyspace_name
    session.execute(
        "CREATE TABLE m (a int, b text, c timeuuid, d int, s int static, v map<text, int>, w frozen<list<int>>, "
        "PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c DESC, d ASC)"
    )
    cluster.refresh_schema_metadata()
    assert ks in cluster.metadata.keyspaces
    kmeta = cluster.metadata.keyspaces[ks]
    assert kmeta.replication_strategy.replication_factor == 1
    assert type(kmeta.replication_strategy).__name__ == "SimpleStrategy"
    t = kmeta.tables["m"]
    assert [c.name for c in t.partition_key] == ["a", "b"]
    assert [c.name for c in t.clustering_key] == ["c", "d"]
    assert [c.is_reversed for c in t.clustering_key] == [True, False]
    assert {n: c.cql_type for n, c in t.columns.items()} == {
        "a": "int", "b": "text", "c": "timeuuid", "d": "int", "s": "int", "v": "map<text, int>",
        "w": "frozen<list<int>>",
    }
    assert [n for n, c in t.columns.items() if c.is_static] == ["s"]
    assert [c.name for c in t.primary_key] == ["a", "b", "c", "d"]


def test_system_schema_columns_describe_a_created_table(session):
    session.execute(
        "CREATE TABLE sc (a int, b text, c timeuuid, d int, s int static, v map<text, int>, "
        "PRIMARY KEY ((a, b), c, d)) WITH CLUSTERING ORDER BY (c DESC, d ASC)"
    )
    rows = session.execute(
        "SELECT column_name, kind, position, clustering_order, type FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = 'sc'", (session.keyspace_name,))
    assert sorted(tuple(r) for r in rows) == sorted([
        ("a", "partition_key", 0, "none", "int"),
        ("b", "partition_key", 1, "none", "text"),
        ("c", "clustering", 0, "desc", "timeuuid"),
        ("d", "clustering", 1, "asc", "int"),
        ("s", "static", -1, "none", "int"),
        ("v", "regular", -1, "none", "map<text, int>"),
    ])
    t = session.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = 'sc'",
                        (session.keyspace_name,)).one()
    assert t.id is not None and t.gc_grace_seconds == 864000 and t.default_time_to_live == 0
    assert t.flags == {"compound"}


def test_system_local_has_the_columns_drivers_read(session):
    row = session.execute("SELECT * FROM system.local WHERE key = 'local'").one()
    assert row.release_version == "5.0.4"
    assert row.cql_version == "3.4.7"
    assert row.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert row.data_center == "datacenter1"
    assert row.rack == "rack1"
    assert row.bootstrapped == "COMPLETED"
    assert row.native_protocol_version == "5"
    assert row.host_id is not None and row.schema_version is not None
    assert len(row.tokens) == 16, "num_tokens defaults to 16"
    assert all(-(2**63) <= int(t) < 2**63 for t in row.tokens)


def test_system_local_select_star_has_cassandras_columns_in_order(session):
    rs = session.execute("SELECT * FROM system.local")
    assert rs.column_names == [c["name"] for c in SYSTEM_TABLES["system.local"]]


def test_system_peers_and_peers_v2_are_empty_on_one_node(session):
    assert list(session.execute("SELECT * FROM system.peers")) == []
    assert list(session.execute("SELECT * FROM system.peers_v2")) == []


@pytest.mark.parametrize("table", sorted(SYSTEM_TABLES))
def test_system_table_layout_matches_cassandra(session, table):
    """Names, types, kinds, positions and clustering order as Cassandra 5.0.4 has them."""
    ks, name = table.split(".")
    source = "system_virtual_schema" if ks == "system_virtual_schema" else "system_schema"
    rows = session.execute(
        f"SELECT column_name, type, kind, position, clustering_order FROM {source}.columns "
        "WHERE keyspace_name = %s AND table_name = %s", (ks, name))
    got = sorted(({"name": r.column_name, "type": r.type, "kind": r.kind, "position": r.position,
                   "clustering_order": r.clustering_order} for r in rows), key=goldens.column_sort_key)
    assert got == SYSTEM_TABLES[table]


def test_system_keyspaces_are_the_ones_cassandra_has(session):
    names = {r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert {"system", "system_auth", "system_distributed", "system_schema", "system_traces"} <= names
    virtual = {r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_virtual_schema.keyspaces")}
    assert {"system_views", "system_virtual_schema"} <= virtual


def test_tokens_match_cassandras_murmur3(session):
    session.execute("CREATE TABLE tk (k text PRIMARY KEY)")
    expected = {"test": -6017608668500074083, "kremówki": 4354931215268080151, "château": 9114062196463836094,
                "abcdefghijklmnopq": 8459014091212432983, "a\u0080\u00ff": 6071579155376688927}
    for k in expected:
        session.execute("INSERT INTO tk (k) VALUES (%s)", (k,))
    got = {r.k: r[1] for r in session.execute("SELECT k, token(k) FROM tk")}
    assert got == expected
    assert [r.k for r in session.execute("SELECT k FROM tk")] == sorted(expected, key=expected.get), \
        "a full scan returns partitions in token order"
    session.execute("CREATE TABLE ck (a int, b text, PRIMARY KEY ((a, b)))")
    session.execute("INSERT INTO ck (a, b) VALUES (1, 'x')")
    assert session.execute("SELECT token(a, b) FROM ck").one()[0] == 746584927563629270

"""The PyPI cqlsh against a real node."""


def test_cqlsh_describe_select_and_consistency(cqlsh, session):
    ks = session.keyspace_name
    session.execute("CREATE TABLE t (k int, c int, v text, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'hi'")
    session.execute("INSERT INTO t (k, c, v) VALUES (1, 2, 'two')")
    p = cqlsh.e("DESCRIBE KEYSPACES")
    assert p.returncode == 0, p.stderr
    assert ks in p.stdout and "system_schema" in p.stdout
    p = cqlsh.e(f"DESCRIBE KEYSPACE {ks}")
    assert p.returncode == 0, p.stderr
    assert f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': '1'}}  AND durable_writes = true;" in p.stdout
    p = cqlsh.e(f"DESCRIBE TABLE {ks}.t")
    assert p.returncode == 0, p.stderr
    expected_head = f"CREATE TABLE {ks}.t (\n    k int,\n    c int,\n    v text,\n    PRIMARY KEY (k, c)\n) WITH CLUSTERING ORDER BY (c DESC)\n"
    assert expected_head in p.stdout
    assert "AND comment = 'hi'" in p.stdout
    p = cqlsh.e(f"CONSISTENCY QUORUM; SELECT * FROM {ks}.t")
    assert p.returncode == 0, p.stderr
    assert "Consistency level set to QUORUM." in p.stdout
    assert " 1 | 2 | two" in p.stdout
    assert "(1 rows)" in p.stdout


def test_cqlsh_runs_a_file_and_reports_errors(cqlsh, session, tmp_path):
    ks = session.keyspace_name
    f = tmp_path / "script.cql"
    f.write_text(
        f"USE {ks};\nCREATE TABLE f (k int PRIMARY KEY, v int);\n"
        + "".join(f"INSERT INTO f (k, v) VALUES ({i}, {i * i});\n" for i in range(20))
        + "SELECT count(*) FROM f;\n"
    )
    p = cqlsh.run("-f", str(f))
    assert p.returncode == 0, p.stderr
    assert "20" in p.stdout
    p = cqlsh.e(f"SELECT * FROM {ks}.nosuch")
    assert p.returncode != 0
    assert "nosuch" in p.stderr


def test_cqlsh_describe_keyspace_matches_cassandra_golden(cqlsh):
    """tests/golden/describe_keyspace_dk.txt is `cqlsh -e "DESCRIBE KEYSPACE dk"` from Cassandra 5.0.4."""
    import os

    golden = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden")
    p = cqlsh.run("-f", os.path.join(golden, "describe_schema.cql"))
    assert p.returncode == 0, p.stderr
    p = cqlsh.e("DESCRIBE KEYSPACE dk")
    assert p.returncode == 0, p.stderr
    with open(os.path.join(golden, "describe_keyspace_dk.txt")) as f:
        expected = f.read()
    got = "".join(line for line in p.stdout.splitlines(True) if not line.startswith("WARNING"))
    assert got == expected
    cqlsh.e("DROP KEYSPACE dk")

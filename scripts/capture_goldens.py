#!/usr/bin/env python3
"""Regenerates tests/golden/ from a running Apache Cassandra 5.0.4.

    /work/shared/cassandra/start.sh --port 9043
    .venv/bin/python scripts/capture_goldens.py --port 9043

Writes, from what Cassandra answers:
  describe_keyspaces.txt, describe_keyspace_golden_ks.txt, describe_keyspace_golden_nts.txt,
  describe_table_golden_ks_events.txt, describe_table_defaults.txt   (cqlsh -e "DESCRIBE ...")
  select_readings.txt                 (cqlsh SELECT output)
  errors.json                         (error class, code and exact message per bad statement)
  system_tables.json                  (columns of system.local/peers/peers_v2, system_schema.*,
                                       system_virtual_schema.*)
  system_local_row.txt                (the full `SELECT * FROM system.local` row)
The schema they describe is tests/golden/describe_schema.cql (hand-written input).
Run it against a node with no keyspaces of its own besides the system ones.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import goldens  # noqa: E402  (tests/python/goldens.py: the cases shared with the tests)


def cqlsh(host, port, *args):
    exe = os.path.join(os.path.dirname(sys.executable), "cqlsh")
    p = subprocess.run([exe, host, str(port), *args], capture_output=True, text=True, timeout=120,
                       env=goldens.cqlsh_env())
    if p.returncode != 0:
        raise SystemExit(f"cqlsh {' '.join(args)} failed: {p.stderr}")
    return p.stdout


def write(name, text):
    with open(os.path.join(GOLDEN, name), "w") as f:
        f.write(text)
    print("wrote", os.path.join("tests", "golden", name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9043)
    a = ap.parse_args()
    from cassandra.cluster import Cluster

    cluster = Cluster([a.host], port=a.port)
    session = cluster.connect()
    extra = [r.keyspace_name for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
             if not r.keyspace_name.startswith(("system", "golden_"))]
    if extra:
        print(f"warning: non-system keyspaces present, DESCRIBE KEYSPACES golden will list them: {extra}")

    session.execute("DROP KEYSPACE IF EXISTS golden_errors")  # a leftover of an interrupted run

    # DESCRIBE and SELECT through cqlsh, on the schema of describe_schema.cql
    cqlsh(a.host, a.port, "-f", os.path.join(GOLDEN, "describe_schema.cql"))
    for name, statement in goldens.CQLSH_CASES.items():
        write(name, cqlsh(a.host, a.port, "-e", statement))
    cqlsh(a.host, a.port, "-e", "DROP KEYSPACE golden_ks; DROP KEYSPACE golden_nts")

    # exact error messages
    ks = "golden_errors"
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.set_keyspace(ks)
    for st in goldens.ERROR_SETUP:
        session.execute(st.format(ks=ks))
    errors = {}
    for case, statement in goldens.ERROR_CASES.items():
        try:
            session.execute(statement.format(ks=ks))
        except Exception as e:  # noqa: BLE001 - the error is what we record
            cls, _, driver_message = goldens.server_error(e)
            code, message = goldens.raw_error(a.host, a.port, ks, statement.format(ks=ks))
            errors[case] = {"statement": statement, "class": cls, "code": code,
                            "message": message.replace(ks, "{ks}"),
                            "driver_message": driver_message.replace(ks, "{ks}")}
        else:
            raise SystemExit(f"{case}: {statement!r} did not fail")
    session.set_keyspace("system")
    session.execute(f"DROP KEYSPACE {ks}")
    write("errors.json", json.dumps(errors, indent=2, sort_keys=True) + "\n")

    # system table layouts
    tables = {}
    for ks_name, table_names, source in goldens.SYSTEM_TABLES:
        for t in table_names:
            rows = session.execute(
                f"SELECT column_name, type, kind, position, clustering_order FROM {source}.columns "
                f"WHERE keyspace_name = %s AND table_name = %s", (ks_name, t))
            cols = sorted(({"name": r.column_name, "type": r.type, "kind": r.kind, "position": r.position,
                            "clustering_order": r.clustering_order} for r in rows),
                          key=goldens.column_sort_key)
            if not cols:
                raise SystemExit(f"no columns for {ks_name}.{t}")
            tables[f"{ks_name}.{t}"] = cols
    write("system_tables.json", json.dumps(tables, indent=2) + "\n")

    # the full system.local row, as cqlsh shows it and as the driver decodes it
    row = session.execute("SELECT * FROM system.local").one()
    text = "# SELECT * FROM system.local on Apache Cassandra 5.0.4 (started by shared/cassandra/start.sh)\n"
    text += "# driver view: column = repr(value)\n"
    for k, v in row._asdict().items():
        text += f"{k} = {v!r}\n"
    text += "\n# cqlsh view (EXPAND ON)\n"
    text += cqlsh(a.host, a.port, "-e", "EXPAND ON; SELECT * FROM system.local")
    write("system_local_row.txt", text)
    cluster.shutdown()


if __name__ == "__main__":
    main()

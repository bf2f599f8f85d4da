"""Records Apache Cassandra 5.0.4's answers that test_system_views.py
checks Sibyl against: the errors of statements on virtual tables.

    ../shared/cassandra/start.sh --dir D --port 9043
    .venv/bin/python tests/python/capture_system_views.py 127.0.0.1:9043
"""
import json
import os
import sys

from cassandra.cluster import Cluster

import goldens

STATEMENTS = [
    "INSERT INTO system_views.clients (address, port) VALUES ('127.0.0.1', 1)",
    "UPDATE system_views.settings SET value = '1' WHERE name = 'x'",
    "DELETE FROM system_views.settings WHERE name = 'x'",
    "TRUNCATE system_views.clients",
    "INSERT INTO system_virtual_schema.tables (keyspace_name, table_name) VALUES ('a', 'b')",
    "TRUNCATE system_virtual_schema.tables",
    "UPDATE system_views.settings SET value = '1' WHERE name = 'x' IF EXISTS",
    "INSERT INTO system_views.settings (name, value) VALUES ('x', 'y') IF NOT EXISTS",
    "BEGIN BATCH INSERT INTO system_views.clients (address, port) VALUES ('127.0.0.1', 1); APPLY BATCH",
    "BEGIN UNLOGGED BATCH INSERT INTO system_views.clients (address, port) VALUES ('127.0.0.1', 1); "
    "INSERT INTO system.local (key) VALUES ('x'); APPLY BATCH",
    "CREATE INDEX ON system_views.settings (value)",
]


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    c = Cluster([host], port=int(port))
    s = c.connect()
    out = []
    for q in STATEMENTS:
        try:
            s.execute(q)
            out.append({"statement": q, "error": None})
        except Exception as e:
            cls, code, message = goldens.server_error(e)
            out.append({"statement": q, "code": code, "message": message})
    c.shutdown()
    path = os.path.join(goldens.GOLDEN, "system_views", "errors.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

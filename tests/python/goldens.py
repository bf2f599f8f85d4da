"""What tests/golden/ holds and how it is read: the cases shared by
scripts/capture_goldens.py (which records them from Apache Cassandra 5.0.4)
and the tests (which replay them against the server under test)."""
import json
import os
import re
import socket
import struct
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")

# cqlsh -e STATEMENT, run after tests/golden/describe_schema.cql; file name -> statement
CQLSH_CASES = {
    "describe_keyspaces.txt": "DESCRIBE KEYSPACES",
    "describe_keyspace_golden_ks.txt": "DESCRIBE KEYSPACE golden_ks",
    "describe_keyspace_golden_nts.txt": "DESCRIBE KEYSPACE golden_nts",
    "describe_table_golden_ks_events.txt": "DESCRIBE TABLE golden_ks.events",
    "describe_table_defaults.txt": "DESCRIBE TABLE golden_ks.defaults",
    "describe_type_golden_ks_addr.txt": "DESCRIBE TYPE golden_ks.addr",
    "describe_tables_golden_ks.txt": "USE golden_ks; DESCRIBE TABLES",
    "select_readings.txt": "SELECT * FROM golden_ks.readings; "
    "SELECT sensor, at, value FROM golden_ks.readings WHERE sensor = 's1' AND day = '2024-02-29'",
    "consistency.txt": "CONSISTENCY; CONSISTENCY QUORUM; CONSISTENCY; "
    "SELECT sensor, value FROM golden_ks.readings WHERE sensor = 's2' AND day = '2024-03-01'",
}

# run in a fresh keyspace {ks} before ERROR_CASES
ERROR_SETUP = [
    "CREATE TABLE e (k int, c int, v int, t text, PRIMARY KEY (k, c))",
    "CREATE TABLE pk2 (a int, b int, v int, PRIMARY KEY ((a, b)))",
]

# case name -> a statement that fails; the session's keyspace is {ks}
ERROR_CASES = {
    "syntax_misspelled_keyword": "SELEC * FROM e",
    "syntax_mismatched_input": "SELECT * FRM e",
    "syntax_unexpected_end": "SELECT * FROM e WHERE",
    "unknown_keyspace_select": "SELECT * FROM nosuchks.t",
    "unknown_keyspace_use": "USE nosuchks",
    "unknown_keyspace_create_table": "CREATE TABLE nosuchks.t (k int PRIMARY KEY)",
    "unknown_table_select": "SELECT * FROM nosuchtable",
    "unknown_table_insert": "INSERT INTO nosuchtable (k) VALUES (1)",
    "unknown_column_select": "SELECT nope FROM e",
    "unknown_column_where": "SELECT * FROM e WHERE k = 1 AND nope = 1",
    "unknown_column_insert": "INSERT INTO e (k, c, nope) VALUES (1, 1, 1)",
    "unknown_column_update": "UPDATE e SET nope = 1 WHERE k = 1 AND c = 1",
    "allow_filtering_regular_column": "SELECT * FROM e WHERE v = 1",
    "allow_filtering_clustering_without_partition_key": "SELECT * FROM e WHERE c = 1",
    "allow_filtering_partial_partition_key": "SELECT * FROM pk2 WHERE a = 1",
    "wrong_type_string_for_int": "INSERT INTO e (k, c, v) VALUES ('x', 1, 1)",
    "wrong_type_int_for_text": "INSERT INTO e (k, c, t) VALUES (1, 1, 42)",
    "wrong_type_in_where": "SELECT * FROM e WHERE k = 'x'",
    "missing_partition_key": "INSERT INTO e (c, v) VALUES (1, 1)",
    "missing_partition_key_part": "INSERT INTO pk2 (a, v) VALUES (1, 1)",
    "missing_clustering_key": "INSERT INTO e (k, v) VALUES (1, 1)",
    "update_missing_clustering_key": "UPDATE e SET v = 1 WHERE k = 1",
    "order_by_regular_column": "SELECT * FROM e WHERE k = 1 ORDER BY v",
    "limit_zero": "SELECT * FROM e LIMIT 0",
    "create_existing_table": "CREATE TABLE e (k int PRIMARY KEY)",
    "create_existing_keyspace": "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
    "drop_unknown_keyspace": "DROP KEYSPACE nosuchks",
    "drop_unknown_table": "DROP TABLE nosuchtable",
    "alter_add_existing_column": "ALTER TABLE e ADD v int",
    "create_table_unknown_type": "CREATE TABLE bad (k nosuchtype PRIMARY KEY)",
    "create_table_without_primary_key": "CREATE TABLE bad (k int, v int)",
    "unknown_replication_strategy": "CREATE KEYSPACE bad WITH replication = {{'class': 'NoSuchStrategy', 'replication_factor': 1}}",
    "replication_without_class": "CREATE KEYSPACE bad WITH replication = {{'replication_factor': 1}}",
}

SYSTEM_SCHEMA_TABLES = ["keyspaces", "tables", "columns", "dropped_columns", "triggers", "views", "types",
                        "functions", "aggregates", "indexes"]
# (keyspace, tables, keyspace whose `columns` table describes them)
SYSTEM_TABLES = [
    ("system", ["local", "peers", "peers_v2"], "system_schema"),
    ("system_schema", SYSTEM_SCHEMA_TABLES, "system_schema"),
    ("system_virtual_schema", ["keyspaces", "tables", "columns"], "system_virtual_schema"),
]

KIND_ORDER = {"partition_key": 0, "clustering": 1, "static": 2, "regular": 3}


def column_sort_key(c):
    return (KIND_ORDER.get(c["kind"], 9), c["position"], c["name"])


def load_json(name):
    with open(os.path.join(GOLDEN, name)) as f:
        return json.load(f)


def read(name):
    with open(os.path.join(GOLDEN, name)) as f:
        return f.read()


def cqlsh_bin():
    """The PyPI cqlsh of this virtualenv."""
    import shutil
    import sys
    b = os.path.join(os.path.dirname(sys.executable), "cqlsh")
    return b if os.path.exists(b) else (shutil.which("cqlsh") or b)


def cqlsh_env():
    """cqlsh with no user cqlshrc, so its output depends only on the server."""
    home = os.path.join(tempfile.gettempdir(), "sibyl-cqlsh-home")
    os.makedirs(home, exist_ok=True)
    env = dict(os.environ, HOME=home, TZ="UTC")
    env.pop("CQLSH_HOST", None)
    env.pop("CQLSH_PORT", None)
    return env


_SUMMARY = re.compile(r'code=([0-9a-fA-F]+) \[[^\]]*\] message="(.*)"', re.S)


def server_error(e):
    """(driver exception class name, error code, server message) of a driver exception."""
    cls = type(e).__name__
    code = getattr(e, "code", None)
    message = getattr(e, "message", None)
    m = _SUMMARY.search(str(e))
    if m:
        code = int(m.group(1), 16) if code is None else code
        message = m.group(2) if message is None else message
    if message is None:
        message = str(e)
    return cls, code, message


# A minimal native-protocol v4 client: it shows the server's own error code and
# message, which drivers sometimes rewrite (AlreadyExists, for one), and the
# warnings of messages whose warnings drivers do not expose (PREPARE, EXECUTE).
def frame(opcode, body, stream=1):
    return struct.pack(">BBhBI", 4, 0, stream, opcode, len(body)) + body


def read_frame(sock):
    """(flags, opcode, body) of the next frame."""
    def exactly(n):
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return buf

    _, flags, _, opcode, length = struct.unpack(">BBhBI", exactly(9))
    return flags, opcode, exactly(length)


def connect_v4(host, port, timeout=30):
    """A socket past STARTUP / READY."""
    s = socket.create_connection((host, port), timeout=timeout)
    startup = {"CQL_VERSION": "3.0.0"}
    body = struct.pack(">H", len(startup))
    for k, v in startup.items():
        body += struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
    s.sendall(frame(0x01, body))
    _, opcode, _ = read_frame(s)
    assert opcode == 0x02, f"expected READY, got opcode {opcode}"
    return s


def _query(sock, q):
    body = struct.pack(">i", len(q.encode())) + q.encode() + struct.pack(">HB", 1, 0)
    sock.sendall(frame(0x07, body))
    _, opcode, body = read_frame(sock)
    if opcode == 0x00:
        code = struct.unpack(">i", body[:4])[0]
        n = struct.unpack(">H", body[4:6])[0]
        return code, body[6:6 + n].decode("utf-8")
    return None


def raw_error(host, port, keyspace, statement):
    """(code, message) of the error `statement` gets in `keyspace`, or None if it succeeds."""
    with connect_v4(host, port) as s:
        err = _query(s, f"USE {keyspace}")
        assert err is None, err
        return _query(s, statement)

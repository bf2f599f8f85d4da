"""Bad bytes on the wire: each gets the right error code, and the node survives."""
import socket
import struct

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from protocol_handshake import frame, string_map

OPTIONS, STARTUP, QUERY, PREPARE, EXECUTE = 0x05, 0x01, 0x07, 0x09, 0x0A
PROTOCOL_ERROR, INVALID, SYNTAX, UNPREPARED = 0x000A, 0x2200, 0x2000, 0x2500


def long_string(b):
    return struct.pack(">i", len(b)) + b


def read_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            return None
        head += chunk
    version, flags, stream, opcode, length = struct.unpack(">BBhBI", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return version & 0x7F, stream, opcode, body


def error_code(body):
    return struct.unpack(">i", body[:4])[0]


@pytest.fixture()
def conn(node):
    s = socket.create_connection((node.host, node.port), timeout=10)
    s.sendall(frame(STARTUP, string_map({"CQL_VERSION": "3.0.0"})))
    assert read_frame(s)[2] == 0x02  # READY
    yield s
    s.close()


def query_body(q, consistency=1, flags=0, values=None):
    body = long_string(q.encode() if isinstance(q, str) else q) + struct.pack(">H", consistency)
    if values is not None:
        flags |= 0x01
        body += struct.pack(">B", flags) + struct.pack(">H", len(values))
        for v in values:
            body += struct.pack(">i", len(v)) + v
    else:
        body += struct.pack(">B", flags)
    return body


def assert_alive(node):
    c = Cluster([node.host], port=node.port)
    assert c.connect().execute("SELECT key FROM system.local").one().key == "local"
    c.shutdown()


def test_unsupported_version_gets_protocol_error_naming_supported_versions(node):
    s = socket.create_connection((node.host, node.port), timeout=10)
    s.sendall(frame(OPTIONS, version=7))
    version, stream, opcode, body = read_frame(s)
    assert opcode == 0 and error_code(body) == PROTOCOL_ERROR
    # Cassandra 5.0.4: "Invalid or unsupported protocol version (7); supported versions are
    # (3/v3, 4/v4, 5/v5, 6/v6-beta)"
    assert b"Invalid or unsupported protocol version (7); supported versions are (3/v3, 4/v4, 5/v5" in body
    s.close()
    assert_alive(node)


def test_unknown_opcode_is_a_protocol_error_and_the_node_survives(conn, node):
    conn.sendall(frame(0x33, b"", stream=7))
    _, stream, opcode, body = read_frame(conn)
    assert stream == 7 and opcode == 0 and error_code(body) == PROTOCOL_ERROR
    assert body[4:] == struct.pack(">H", 17) + b"Unknown opcode 51"
    assert_alive(node)


def test_truncated_body_is_a_protocol_error(conn):
    conn.sendall(frame(QUERY, struct.pack(">i", 1000) + b"SELECT", stream=3))
    _, stream, opcode, body = read_frame(conn)
    assert stream == 3 and opcode == 0 and error_code(body) == PROTOCOL_ERROR
    conn.sendall(frame(OPTIONS, stream=4))
    assert read_frame(conn)[2] == 0x06


def test_invalid_utf8_in_a_query_is_refused(conn):
    conn.sendall(frame(QUERY, query_body(b"SELECT \xff\xfe FROM x"), stream=5))
    _, stream, opcode, body = read_frame(conn)
    assert opcode == 0 and error_code(body) == PROTOCOL_ERROR
    conn.sendall(frame(OPTIONS, stream=6))
    assert read_frame(conn)[2] == 0x06


def test_oversized_frame_is_refused_and_node_survives(node):
    """A header announcing a 1 GiB body. Cassandra 5.0.4 neither answers nor reads it
    (the client times out); answering with an error ("Request is too big") or closing is fine too."""
    s = socket.create_connection((node.host, node.port), timeout=5)
    s.sendall(frame(QUERY, b"", length=1 << 30))
    try:
        r = read_frame(s)
    except OSError:
        r = None
    if r is not None:
        assert r[2] == 0 and error_code(r[3]) in (PROTOCOL_ERROR, INVALID)
        assert b"too big" in r[3]
    s.close()
    assert_alive(node)


def test_wrong_value_length_for_an_int_is_invalid(conn, node, session):
    session.execute("CREATE TABLE bv (k int PRIMARY KEY, v int)")
    q = f"INSERT INTO {session.keyspace_name}.bv (k, v) VALUES (?, ?)"
    conn.sendall(frame(QUERY, query_body(q, values=[struct.pack(">i", 1), b"\x00\x01\x02"]), stream=9))
    _, stream, opcode, body = read_frame(conn)
    assert opcode == 0 and error_code(body) == INVALID
    assert b"Expected 4 or 0 byte int (3)" in body


def test_syntax_errors_carry_line_and_position(session):
    from cassandra.protocol import SyntaxException

    with pytest.raises(SyntaxException, match="line 1:9 mismatched input 'FRM' expecting K_FROM"):
        session.execute("SELECT * FRM t")


def test_unprepared_id_gets_unprepared_error(conn):
    body = struct.pack(">H", 16) + b"\x01" * 16 + struct.pack(">H", 1) + b"\x00"
    conn.sendall(frame(EXECUTE, body, stream=11))
    _, stream, opcode, body = read_frame(conn)
    assert opcode == 0 and error_code(body) == UNPREPARED


def test_garbage_bytes_do_not_kill_the_node(node):
    import random

    rnd = random.Random(42)
    for _ in range(50):
        s = socket.create_connection((node.host, node.port), timeout=10)
        payload = bytes([4, 0, 0, 1, rnd.choice([1, 5, 7, 9, 10, 11, 13])]) + struct.pack(">I", 64) + bytes(rnd.getrandbits(8) for _ in range(64))
        s.sendall(payload)
        s.settimeout(2)
        try:
            read_frame(s)
        except OSError:
            pass
        s.close()
    assert_alive(node)

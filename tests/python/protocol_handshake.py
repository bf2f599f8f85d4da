"""Raw-socket handshake and framing cases, replayed the same way against
Apache Cassandra 5.0.4 (to record tests/golden/protocol_handshake.json):

    python3 tests/python/protocol_handshake.py 127.0.0.1 9043 > tests/golden/protocol_handshake.json

and against Sibyl by test_hardening.py. Each case sends frames on a fresh
connection and records every answer: the error code and message, or the
opcode, or CLOSED / TIMEOUT."""
import json
import socket
import struct
import sys

STARTUP, OPTIONS, QUERY, PREPARE, REGISTER = 0x01, 0x05, 0x07, 0x09, 0x0B


def frame(op, body=b"", stream=1, version=4, flags=0, length=None, first=None):
    n = len(body) if length is None else length
    b0 = version if first is None else first
    return struct.pack(">BBhBI", b0, flags, stream, op, n) + body


def string_map(m):
    out = struct.pack(">H", len(m))
    for k, v in m.items():
        out += struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
    return out


def query(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack(">i", len(b)) + b + struct.pack(">HB", 1, 0)


def read_answer(s, timeout=2.0):
    """The next frame as {'stream', 'error', 'msg'} or {'stream', 'op'}; 'CLOSED' or 'TIMEOUT'."""
    s.settimeout(timeout)
    try:
        h = b""
        while len(h) < 9:
            c = s.recv(9 - len(h))
            if not c:
                return "CLOSED"
            h += c
        _v, _f, st, op, n = struct.unpack(">BBhBI", h)
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                break
            b += c
        if op == 0:
            code = struct.unpack(">i", b[:4])[0]
            ln = struct.unpack(">H", b[4:6])[0]
            return {"stream": st, "error": hex(code), "msg": b[6:6 + ln].decode()}
        return {"stream": st, "op": op}
    except (socket.timeout, ConnectionResetError):
        return "TIMEOUT"


STARTUP_OK = frame(STARTUP, string_map({"CQL_VERSION": "3.0.0"}))
LOCAL = query("SELECT key FROM system.local")

# name -> (frames to send, each followed by reading one answer; then a STARTUP on stream 9?)
CASES = {
    "query_before_startup": ([frame(QUERY, query("SELECT * FROM system.local"))], True),
    "prepare_before_startup": ([frame(PREPARE, struct.pack(">i", 3) + b"abc")], True),
    "register_before_startup": ([frame(REGISTER, struct.pack(">H", 0))], True),
    "startup_no_cql_version": ([frame(STARTUP, string_map({}))], True),
    "startup_bogus_cql_version": ([frame(STARTUP, string_map({"CQL_VERSION": "bogus"}))], True),
    "startup_old_cql_version": ([frame(STARTUP, string_map({"CQL_VERSION": "2.0.0"}))], True),
    "second_startup": ([STARTUP_OK, frame(STARTUP, string_map({"CQL_VERSION": "3.0.0"}), stream=2)], False),
    "multibyte_query": ([STARTUP_OK, frame(QUERY, query("a\u20ac"), stream=2), frame(QUERY, LOCAL, stream=3)], False),
    "too_big_then_query": ([STARTUP_OK, frame(QUERY, b"x" * (20 << 20), stream=5), frame(QUERY, LOCAL, stream=6)], False),
    # the first answer of these two is compared; what follows differs (below)
    "response_bit": ([frame(OPTIONS, first=0x84)], False),
    "unsupported_version": ([frame(OPTIONS, version=0x42)], False),
}


def run_case(host, port, name):
    frames, then_startup = CASES[name]
    s = socket.create_connection((host, port))
    out = []
    try:
        for f in frames:
            s.sendall(f)
            out.append(read_answer(s, timeout=10 if len(f) > 1 << 20 else 2))
        if then_startup:
            s.sendall(frame(STARTUP, string_map({"CQL_VERSION": "3.0.0"}), stream=9))
            out.append(read_answer(s))
    finally:
        s.close()
    return out


if __name__ == "__main__":
    host, port = sys.argv[1], int(sys.argv[2])
    print(json.dumps({name: run_case(host, port, name) for name in CASES}, indent=1, sort_keys=True))

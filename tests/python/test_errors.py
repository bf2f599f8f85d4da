"""Errors: the class drivers raise, the protocol error code and Cassandra's exact
wording (tests/golden/errors.json, recorded from Cassandra 5.0.4)."""
import struct

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.protocol import ConfigurationException, SyntaxException

import goldens

ERRORS = goldens.load_json("errors.json")
CLASSES = {"InvalidRequest": InvalidRequest, "SyntaxException": SyntaxException, "AlreadyExists": AlreadyExists,
           "ConfigurationException": ConfigurationException}
ALLOW_FILTERING = ("Cannot execute this query as it might involve data filtering and thus may have unpredictable "
                   "performance. If you want to execute this query despite the performance unpredictability, "
                   "use ALLOW FILTERING")


@pytest.fixture()
def err_session(session):
    for st in goldens.ERROR_SETUP:
        session.execute(st)
    return session


def expect(case, ks):
    g = ERRORS[case]
    return CLASSES[g["class"]], g["code"], g["message"].format(ks=ks), g["driver_message"].format(ks=ks)


@pytest.mark.parametrize("case", sorted(goldens.ERROR_CASES))
def test_error_class_code_and_message_match_cassandra(err_session, node, case):
    ks = err_session.keyspace_name
    statement = goldens.ERROR_CASES[case].format(ks=ks)
    assert ERRORS[case]["statement"] == goldens.ERROR_CASES[case], "errors.json is stale: rerun capture_goldens.py"
    cls, code, message, driver_message = expect(case, ks)
    with pytest.raises(cls) as ei:
        err_session.execute(statement)
    assert type(ei.value) is cls
    assert goldens.server_error(ei.value)[2] == driver_message
    # the server's own code and text, as they are on the wire
    assert goldens.raw_error(node.host, node.port, ks, statement) == (code, message)
    # the connection is still usable
    assert err_session.execute("SELECT count(*) FROM e").one()[0] == 0


def test_syntax_error_is_a_syntax_exception_with_position(err_session):
    with pytest.raises(SyntaxException) as ei:
        err_session.execute("SELECT * FRM e")
    assert ei.value.code == 0x2000
    assert goldens.server_error(ei.value)[2] == "line 1:9 mismatched input 'FRM' expecting K_FROM (SELECT * [FRM]...)"


def test_unknown_keyspace_table_and_column_are_invalid_requests(err_session):
    with pytest.raises(InvalidRequest, match="^.*keyspace nosuchks does not exist\"$"):
        err_session.execute("SELECT * FROM nosuchks.t")
    with pytest.raises(InvalidRequest, match="table nosuchtable does not exist"):
        err_session.execute("SELECT * FROM nosuchtable")
    with pytest.raises(InvalidRequest, match=f"Undefined column name nope in table {err_session.keyspace_name}.e"):
        err_session.execute("SELECT nope FROM e")


def test_filtering_without_allow_filtering_is_refused_with_cassandras_text(err_session):
    with pytest.raises(InvalidRequest) as ei:
        err_session.execute("SELECT * FROM e WHERE v = 1")
    assert goldens.server_error(ei.value)[2] == ALLOW_FILTERING
    assert list(err_session.execute("SELECT * FROM e WHERE v = 1 ALLOW FILTERING")) == []


def test_wrong_type_literal_is_an_invalid_request(err_session):
    with pytest.raises(InvalidRequest, match='Invalid STRING constant \\(x\\) for "k" of type int'):
        err_session.execute("INSERT INTO e (k, c, v) VALUES ('x', 1, 1)")


def test_wrong_size_bound_value_is_an_invalid_request(err_session, node):
    """A 3-byte value bound to an int column, sent as a raw QUERY with values."""
    ks = err_session.keyspace_name
    with goldens.connect_v4(node.host, node.port) as s:
        q = f"INSERT INTO {ks}.e (k, c, v) VALUES (?, ?, ?)".encode()
        values = [struct.pack(">i", 1), struct.pack(">i", 1), b"\x00\x01\x02"]
        body = struct.pack(">i", len(q)) + q + struct.pack(">HBH", 1, 0x01, len(values))
        for v in values:
            body += struct.pack(">i", len(v)) + v
        s.sendall(goldens.frame(0x07, body))
        _, opcode, resp = goldens.read_frame(s)
    assert opcode == 0x00
    assert struct.unpack(">i", resp[:4])[0] == 0x2200
    assert b"Expected 4 or 0 byte int (3)" in resp


def test_missing_partition_key_in_insert_is_an_invalid_request(err_session):
    with pytest.raises(InvalidRequest, match="Some partition key parts are missing: k"):
        err_session.execute("INSERT INTO e (c, v) VALUES (1, 1)")
    with pytest.raises(InvalidRequest, match="Some partition key parts are missing: b"):
        err_session.execute("INSERT INTO pk2 (a, v) VALUES (1, 1)")



@pytest.mark.parametrize("statement, to, sources", [
    ("INSERT INTO amb (k, i) VALUES (1, CAST(1 AS int))", "int",
     {"bigint", "counter", "decimal", "double", "float", "smallint", "tinyint", "varint"}),
    ("INSERT INTO amb (k, a) VALUES (1, CAST('b' AS ascii))", "ascii", {"date", "inet", "time", "timestamp"}),
    # a timestamp is value-compatible with bigint and varint
    ("SELECT CAST(ts AS int) FROM amb", "int", {"bigint", "varint"}),
])
def test_an_ambiguous_cast_lists_the_signatures_that_fit(session, statement, to, sources):
    """Cassandra lists them in the order of a hash set of functions, which
    changes from one start of Cassandra to the next (so the corpus cannot hold
    these); the set is checked instead."""
    session.execute("CREATE TABLE IF NOT EXISTS amb (k int PRIMARY KEY, i int, a ascii, ts timestamp)")
    with pytest.raises(InvalidRequest) as ei:
        session.execute(statement)
    message = goldens.server_error(ei.value)[2]
    prefix = f"Ambiguous call to function system.cast_as_{to} (can be matched by following signatures: "
    suffix = "): use type casts to disambiguate"
    assert message.startswith(prefix) and message.endswith(suffix), message
    listed = message[len(prefix):-len(suffix)].split(", ")
    assert {s.split("(")[1].split(")")[0] for s in listed} == sources
    assert all(s.startswith(f"system.cast_as_{to} : (") and s.endswith(f") -> {to}") for s in listed)

"""Every native scalar type round-trips: as a CQL literal, through the driver's
client-side interpolation (unprepared) and as a bound value (prepared)."""
import datetime
import decimal
import ipaddress
import math
import uuid

import pytest
from cassandra.util import Date, Duration, Time

from conftest import new_keyspace_name

# (type, CQL literal, the value the driver decodes it to); several per type, edge values included
CASES = [
    ("ascii", "'abc'", "abc"),
    ("ascii", "''", ""),
    ("bigint", "1099511627776", 2**40),
    ("bigint", "-9223372036854775808", -(2**63)),
    ("bigint", "9223372036854775807", 2**63 - 1),
    ("blob", "0x0001ff", b"\x00\x01\xff"),
    ("blob", "0x", b""),
    ("boolean", "true", True),
    ("boolean", "false", False),
    ("date", "'2024-02-29'", Date(datetime.date(2024, 2, 29))),
    ("date", "'1970-01-01'", Date(datetime.date(1970, 1, 1))),
    ("date", "'1969-12-31'", Date(datetime.date(1969, 12, 31))),
    ("decimal", "123.4500", decimal.Decimal("123.4500")),
    ("decimal", "-0.000001", decimal.Decimal("-0.000001")),
    ("decimal", "1E+30", decimal.Decimal("1E+30")),
    ("double", "1.5", 1.5),
    ("double", "-1.0E300", -1.0e300),
    ("double", "Infinity", math.inf),
    ("duration", "1mo2d3us", Duration(1, 2, 3000)),
    ("duration", "-1h30m", Duration(0, 0, -(90 * 60 * 10**9))),
    ("duration", "P1Y2M3DT4H5M6S", Duration(14, 3, (4 * 3600 + 5 * 60 + 6) * 10**9)),
    ("float", "2.5", 2.5),
    ("float", "-0.125", -0.125),
    ("inet", "'10.1.2.3'", "10.1.2.3"),
    ("inet", "'::1'", "::1"),
    ("inet", "'2001:db8::ff00:42:8329'", "2001:db8::ff00:42:8329"),
    ("int", "-7", -7),
    ("int", "-2147483648", -(2**31)),
    ("int", "2147483647", 2**31 - 1),
    ("smallint", "300", 300),
    ("smallint", "-32768", -32768),
    ("text", "'héllo wörld ✓'", "héllo wörld ✓"),
    ("text", "'it''s'", "it's"),
    ("text", "$$dollar 'quoted'$$", "dollar 'quoted'"),
    ("time", "'01:02:03.000000001'", Time(3723000000001)),
    ("time", "'23:59:59.999999999'", Time(86399999999999)),
    ("timestamp", "'2024-01-02 03:04:05.678+0000'", datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)),
    ("timestamp", "0", datetime.datetime(1970, 1, 1)),
    ("timestamp", "-1000", datetime.datetime(1969, 12, 31, 23, 59, 59)),
    ("timeuuid", "e7b2f2a0-7c0e-11ee-b962-0242ac120002", uuid.UUID("e7b2f2a0-7c0e-11ee-b962-0242ac120002")),
    ("tinyint", "-3", -3),
    ("tinyint", "127", 127),
    ("tinyint", "-128", -128),
    ("uuid", "5132b130-ae79-4d4c-b6a8-3b8f5b4e0e0a", uuid.UUID("5132b130-ae79-4d4c-b6a8-3b8f5b4e0e0a")),
    ("varint", "1000000000000000000000000000000", 10**30),
    ("varint", "-170141183460469231731687303715884105729", -(2**127) - 1),
    ("varint", "0", 0),
]

NATIVE_TYPES = sorted({t for t, _, _ in CASES})


def ids(case):
    return f"{case[0]}:{case[1]}"


def same(typ, got, want):
    if typ == "inet":
        return ipaddress.ip_address(got) == ipaddress.ip_address(want)
    return type(got) is type(want) and got == want


@pytest.fixture(scope="module")
def typed(cluster):
    """One keyspace for the module, with tables ty_<type> (k int PRIMARY KEY, v <type>) and
    ck_<type> (k int, c <type>, PRIMARY KEY (k, c)); each case writes its own partitions."""
    s = cluster.connect()
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.set_keyspace(ks)
    for t in NATIVE_TYPES:
        s.execute(f"CREATE TABLE ty_{t} (k int PRIMARY KEY, v {t})")
        if t != "duration":  # durations can't be ordered, so can't be clustering keys
            s.execute(f"CREATE TABLE ck_{t} (k int, c {t}, PRIMARY KEY (k, c))")
    yield s
    s.execute(f"DROP KEYSPACE {ks}")
    s.shutdown()


@pytest.mark.parametrize("n,typ,literal,value", [(n, *c) for n, c in enumerate(CASES)], ids=[ids(c) for c in CASES])
def test_native_type_round_trips_as_literal_unprepared_and_prepared(typed, n, typ, literal, value):
    s = typed
    k1, k2, k3 = 10 * n + 1, 10 * n + 2, 10 * n + 3
    s.execute(f"INSERT INTO ty_{typ} (k, v) VALUES ({k1}, {literal})")
    s.execute(f"INSERT INTO ty_{typ} (k, v) VALUES ({k2}, %s)", (value,))
    s.execute(s.prepare(f"INSERT INTO ty_{typ} (k, v) VALUES (?, ?)"), (k3, value))
    sel = s.prepare(f"SELECT v FROM ty_{typ} WHERE k = ?")
    for k in (k1, k2, k3):
        got = s.execute(sel, (k,)).one().v
        assert same(typ, got, value), (k, typ, got, value)
        got = s.execute(f"SELECT v FROM ty_{typ} WHERE k = {k}").one().v
        assert same(typ, got, value), (k, typ, got, value)


@pytest.mark.parametrize("typ", NATIVE_TYPES)
def test_native_type_null_round_trips(typed, typ):
    typed.execute(f"INSERT INTO ty_{typ} (k, v) VALUES (-1, null)")
    typed.execute(typed.prepare(f"INSERT INTO ty_{typ} (k, v) VALUES (?, ?)"), (-2, None))
    for k in (-1, -2):
        row = typed.execute(f"SELECT k, v FROM ty_{typ} WHERE k = {k}").one()
        assert tuple(row) == (k, None)


ORDERABLE = [(n, *c) for n, c in enumerate(CASES) if c[0] != "duration"]


@pytest.mark.parametrize("n,typ,literal,value", ORDERABLE, ids=[ids(c[1:]) for c in ORDERABLE])
def test_native_type_works_as_a_clustering_key(typed, n, typ, literal, value):
    typed.execute(f"INSERT INTO ck_{typ} (k, c) VALUES ({n}, {literal})")
    got = typed.execute(typed.prepare(f"SELECT c FROM ck_{typ} WHERE k = ? AND c = ?"), (n, value)).one()
    assert got is not None and same(typ, got.c, value)


def test_clustering_order_follows_each_types_comparator(session):
    session.execute("CREATE TABLE ov (k int, a varint, PRIMARY KEY (k, a))")
    for v in (10, -1, 2**70, -(2**70), 0, 255, -256):
        session.execute("INSERT INTO ov (k, a) VALUES (0, %s)", (v,))
    assert [r.a for r in session.execute("SELECT a FROM ov WHERE k = 0")] == sorted([10, -1, 2**70, -(2**70), 0, 255, -256])
    session.execute("CREATE TABLE ot (k int, t timeuuid, PRIMARY KEY (k, t))")
    # timeuuids order by their timestamp first, then by the remaining bytes as signed
    early = uuid.UUID("00000000-0000-1000-8000-000000000000")
    late = uuid.UUID("ffffffff-ffff-1fff-8000-000000000000")
    mid = uuid.UUID("e7b2f2a0-7c0e-11ee-b962-0242ac120002")
    for t in (late, early, mid):
        session.execute("INSERT INTO ot (k, t) VALUES (0, %s)", (t,))
    assert [r.t for r in session.execute("SELECT t FROM ot WHERE k = 0")] == [early, mid, late]
    session.execute("CREATE TABLE os (k int, s text, PRIMARY KEY (k, s))")
    for s in ("b", "a", "é", "B", "ab", ""):
        session.execute("INSERT INTO os (k, s) VALUES (0, %s)", (s,))
    assert [r.s for r in session.execute("SELECT s FROM os WHERE k = 0")] == sorted(
        ["b", "a", "é", "B", "ab", ""], key=lambda x: x.encode())

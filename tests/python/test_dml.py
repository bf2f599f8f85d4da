"""INSERT, UPDATE, DELETE and SELECT semantics."""
import time

import pytest


@pytest.fixture()
def grid(session):
    """Table r: partitions k = 0..2, clustering c = 0..4, v = 'k-c', w = c * 10."""
    session.execute("CREATE TABLE r (k int, c int, v text, w int, PRIMARY KEY (k, c))")
    ins = session.prepare("INSERT INTO r (k, c, v, w) VALUES (?, ?, ?, ?)")
    for k in range(3):
        for c in range(5):
            session.execute(ins, (k, c, f"{k}-{c}", c * 10))
    return session


def cs(session, q, *args):
    return [r.c for r in session.execute(q, *args)]


def test_insert_then_select_returns_the_row(session):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v text, w int)")
    session.execute("INSERT INTO t (k, v, w) VALUES (1, 'a', 2)")
    rs = session.execute("SELECT * FROM t WHERE k = 1")
    assert rs.column_names == ["k", "v", "w"]
    assert tuple(rs.one()) == (1, "a", 2)
    assert session.execute("SELECT * FROM t WHERE k = 2").one() is None
    session.execute("INSERT INTO t (k, v) VALUES (1, 'b')")
    assert tuple(session.execute("SELECT * FROM t WHERE k = 1").one()) == (1, "b", 2), "INSERT is an upsert"


def test_select_with_partition_key_equality_and_in(grid):
    assert cs(grid, "SELECT c FROM r WHERE k = 1") == [0, 1, 2, 3, 4]
    rows = [(r.k, r.c) for r in grid.execute("SELECT k, c FROM r WHERE k IN (2, 0) AND c = 1")]
    assert rows == [(0, 1), (2, 1)], "IN on the partition key returns partitions in key order"
    assert len(list(grid.execute("SELECT * FROM r WHERE k IN (0, 1, 7)"))) == 10


def test_select_with_clustering_equality_in_and_slices(grid):
    assert grid.execute("SELECT v FROM r WHERE k = 1 AND c = 3").one().v == "1-3"
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c IN (4, 0, 2)") == [0, 2, 4]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c > 1") == [2, 3, 4]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c >= 1 AND c < 3") == [1, 2]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c <= 1") == [0, 1]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c > 4") == []
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND (c) >= (3)") == [3, 4]


def test_order_by_limit_and_per_partition_limit(grid):
    assert cs(grid, "SELECT c FROM r WHERE k = 1 ORDER BY c DESC") == [4, 3, 2, 1, 0]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 ORDER BY c DESC LIMIT 2") == [4, 3]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND c < 3 ORDER BY c DESC") == [2, 1, 0]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 LIMIT 3") == [0, 1, 2]
    rows = list(grid.execute("SELECT k, c FROM r PER PARTITION LIMIT 2"))
    assert len(rows) == 6
    assert sorted((r.k, r.c) for r in rows) == [(k, c) for k in range(3) for c in range(2)]
    assert len(list(grid.execute("SELECT k, c FROM r PER PARTITION LIMIT 2 LIMIT 3"))) == 3


def test_distinct_and_count(grid):
    assert sorted(r.k for r in grid.execute("SELECT DISTINCT k FROM r")) == [0, 1, 2]
    assert grid.execute("SELECT count(*) FROM r").one().count == 15
    assert grid.execute("SELECT COUNT(*) FROM r WHERE k = 1").one()[0] == 5
    assert grid.execute("SELECT count(*) FROM r WHERE k = 1 AND c > 2").one()[0] == 2
    assert grid.execute("SELECT count(*) FROM r WHERE k = 9").one()[0] == 0
    row = grid.execute("SELECT min(w), max(w), sum(w) FROM r WHERE k = 2").one()
    assert tuple(row) == (0, 40, 100)


def test_token_function_orders_and_restricts_a_scan(grid):
    toks = {r.k: r[1] for r in grid.execute("SELECT k, token(k) FROM r PER PARTITION LIMIT 1")}
    assert len(toks) == 3
    order = sorted(toks, key=toks.get)
    assert [r.k for r in grid.execute("SELECT DISTINCT k FROM r")] == order
    first = toks[order[0]]
    after = [r.k for r in grid.execute("SELECT DISTINCT k FROM r WHERE token(k) > %s", (first,))]
    assert after == order[1:]


def test_update_sets_cells_and_creates_rows(grid):
    grid.execute("UPDATE r SET v = 'new', w = 1 WHERE k = 1 AND c = 1")
    assert tuple(grid.execute("SELECT v, w FROM r WHERE k = 1 AND c = 1").one()) == ("new", 1)
    grid.execute("UPDATE r SET v = 'made' WHERE k = 5 AND c = 5")
    assert tuple(grid.execute("SELECT k, c, v, w FROM r WHERE k = 5").one()) == (5, 5, "made", None)
    grid.execute("UPDATE r SET w = 7 WHERE k = 1 AND c IN (2, 3)")
    assert [r.w for r in grid.execute("SELECT w FROM r WHERE k = 1 AND c IN (2, 3)")] == [7, 7]


def test_delete_cell_row_range_and_partition(grid):
    grid.execute("DELETE v FROM r WHERE k = 1 AND c = 1")
    assert tuple(grid.execute("SELECT v, w FROM r WHERE k = 1 AND c = 1").one()) == (None, 10)
    grid.execute("DELETE FROM r WHERE k = 1 AND c = 0")
    assert cs(grid, "SELECT c FROM r WHERE k = 1") == [1, 2, 3, 4]
    grid.execute("DELETE FROM r WHERE k = 1 AND c >= 3")
    assert cs(grid, "SELECT c FROM r WHERE k = 1") == [1, 2]
    grid.execute("DELETE FROM r WHERE k = 0 AND c > 0 AND c < 4")
    assert cs(grid, "SELECT c FROM r WHERE k = 0") == [0, 4]
    grid.execute("DELETE FROM r WHERE k = 2")
    assert list(grid.execute("SELECT * FROM r WHERE k = 2")) == []
    assert grid.execute("SELECT count(*) FROM r").one()[0] == 4
    grid.execute("INSERT INTO r (k, c, v) VALUES (2, 9, 'back')")
    assert cs(grid, "SELECT c FROM r WHERE k = 2") == [9], "a newer write after a partition delete is visible"


def test_a_row_whose_cells_are_all_deleted_but_was_inserted_remains(session):
    session.execute("CREATE TABLE t (k int PRIMARY KEY, v int)")
    session.execute("INSERT INTO t (k, v) VALUES (1, 1)")
    session.execute("DELETE v FROM t WHERE k = 1")
    assert tuple(session.execute("SELECT k, v FROM t WHERE k = 1").one()) == (1, None), "INSERT's row marker keeps it"
    session.execute("UPDATE t SET v = 2 WHERE k = 2")
    session.execute("DELETE v FROM t WHERE k = 2")
    assert session.execute("SELECT k, v FROM t WHERE k = 2").one() is None, "UPDATE writes no row marker"


def test_using_timestamp_last_write_wins(session):
    session.execute("CREATE TABLE lw (k int PRIMARY KEY, v text)")
    session.execute("INSERT INTO lw (k, v) VALUES (1, 'new') USING TIMESTAMP 2000")
    session.execute("INSERT INTO lw (k, v) VALUES (1, 'old') USING TIMESTAMP 1000")
    row = session.execute("SELECT v, writetime(v) FROM lw WHERE k = 1").one()
    assert (row.v, row[1]) == ("new", 2000), "an older timestamp does not overwrite"
    session.execute("UPDATE lw USING TIMESTAMP 3000 SET v = 'newer' WHERE k = 1")
    assert session.execute("SELECT v FROM lw WHERE k = 1").one().v == "newer"
    session.execute("DELETE FROM lw USING TIMESTAMP 2500 WHERE k = 1")
    assert session.execute("SELECT v FROM lw WHERE k = 1").one().v == "newer", "an older delete does not win"
    session.execute("DELETE FROM lw USING TIMESTAMP 3001 WHERE k = 1")
    assert session.execute("SELECT v FROM lw WHERE k = 1").one() is None
    session.execute("INSERT INTO lw (k, v) VALUES (4, 'x') USING TIMESTAMP 5")
    session.execute("DELETE v FROM lw USING TIMESTAMP 5 WHERE k = 4")
    assert session.execute("SELECT v FROM lw WHERE k = 4").one().v is None, "a tombstone wins a timestamp tie"
    session.execute("INSERT INTO lw (k, v) VALUES (5, 'a') USING TIMESTAMP 5")
    session.execute("INSERT INTO lw (k, v) VALUES (5, 'b') USING TIMESTAMP 5")
    session.execute("INSERT INTO lw (k, v) VALUES (5, 'a') USING TIMESTAMP 5")
    assert session.execute("SELECT v FROM lw WHERE k = 5").one().v == "b", "on a tie the larger value wins"


def test_writetime_is_microseconds_of_the_write(session):
    session.execute("CREATE TABLE wt (k int PRIMARY KEY, v int)")
    before = int(time.time() * 1e6)
    session.execute("INSERT INTO wt (k, v) VALUES (1, 1)")
    after = int(time.time() * 1e6)
    wt = session.execute("SELECT writetime(v) FROM wt WHERE k = 1").one()[0]
    assert before - 5_000_000 <= wt <= after + 5_000_000
    assert session.execute("SELECT WRITETIME(v) FROM wt WHERE k = 2").one() is None


def test_using_ttl_and_ttl_function(session):
    session.execute("CREATE TABLE tt (k int PRIMARY KEY, v text, w text)")
    session.execute("INSERT INTO tt (k, v) VALUES (2, 'x') USING TTL 100")
    row = session.execute("SELECT ttl(v), ttl(w) FROM tt WHERE k = 2").one()
    assert 90 <= row[0] <= 100 and row[1] is None
    session.execute("UPDATE tt USING TTL 500 SET w = 'y' WHERE k = 2")
    assert 490 <= session.execute("SELECT ttl(w) FROM tt WHERE k = 2").one()[0] <= 500
    # TTL 3, not 1: a TTL counts from the write's whole second, so a TTL of 1
    # written late in a second expires milliseconds later (the read before
    # the sleep found nothing, once)
    session.execute("INSERT INTO tt (k, v) VALUES (3, 'gone') USING TTL 3 AND TIMESTAMP 1000")
    assert session.execute("SELECT writetime(v) FROM tt WHERE k = 3").one()[0] == 1000
    time.sleep(3.5)
    assert session.execute("SELECT * FROM tt WHERE k = 3").one() is None, "an expired row disappears"


def test_default_time_to_live_applies_to_writes(session):
    session.execute("CREATE TABLE dt (k int PRIMARY KEY, v int) WITH default_time_to_live = 1000")
    session.execute("INSERT INTO dt (k, v) VALUES (1, 1)")
    assert 990 <= session.execute("SELECT ttl(v) FROM dt WHERE k = 1").one()[0] <= 1000
    session.execute("INSERT INTO dt (k, v) VALUES (2, 2) USING TTL 0")
    assert session.execute("SELECT ttl(v) FROM dt WHERE k = 2").one()[0] is None


def test_allow_filtering_runs_a_filtered_query(grid):
    rows = sorted((r.k, r.c) for r in grid.execute("SELECT k, c FROM r WHERE w = 20 ALLOW FILTERING"))
    assert rows == [(0, 2), (1, 2), (2, 2)]
    assert cs(grid, "SELECT c FROM r WHERE k = 1 AND w > 20 ALLOW FILTERING") == [3, 4]


def test_collections_and_user_defined_types(session):
    session.execute("CREATE TYPE addr (street text, zip int)")
    session.execute("CREATE TABLE col (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, "
                    "f frozen<list<int>>, a frozen<addr>, u addr, t tuple<int, text>)")
    session.execute("INSERT INTO col (k, l, s, m, f, a, u, t) VALUES (1, [3, 1, 2], {'b', 'a'}, {'x': 1}, [9], "
                    "{street: 'main', zip: 1}, {street: 's', zip: 2}, (1, 'x'))")
    session.execute("UPDATE col SET l = l + [4], s = s + {'c'}, m['y'] = 2 WHERE k = 1")
    session.execute("UPDATE col SET l = [0] + l, s = s - {'a'} WHERE k = 1")
    session.execute("UPDATE col SET u.zip = 5 WHERE k = 1")
    row = session.execute("SELECT * FROM col WHERE k = 1").one()
    assert row.l == [0, 3, 1, 2, 4]
    assert row.s == {"b", "c"}
    assert row.m == {"x": 1, "y": 2}
    assert row.f == [9]
    assert (row.a.street, row.a.zip) == ("main", 1)
    assert (row.u.street, row.u.zip) == ("s", 5)
    assert row.t == (1, "x")
    session.execute("DELETE m['x'] FROM col WHERE k = 1")
    session.execute("UPDATE col SET l[1] = 30 WHERE k = 1")
    session.execute("UPDATE col SET l = l - [4] WHERE k = 1")
    row = session.execute("SELECT l, m FROM col WHERE k = 1").one()
    assert row.m == {"y": 2}
    assert row.l == [0, 30, 1, 2]
    session.execute("UPDATE col SET s = {} WHERE k = 1")
    assert session.execute("SELECT s FROM col WHERE k = 1").one().s is None, "an empty set reads as null"


def test_static_columns_are_shared_by_a_partition(session):
    session.execute("CREATE TABLE st (k int, c int, s text static, v int, PRIMARY KEY (k, c))")
    session.execute("INSERT INTO st (k, c, s, v) VALUES (1, 1, 'shared', 1)")
    session.execute("INSERT INTO st (k, c, v) VALUES (1, 2, 2)")
    assert [r.s for r in session.execute("SELECT s FROM st WHERE k = 1")] == ["shared", "shared"]
    session.execute("UPDATE st SET s = 'changed' WHERE k = 1")
    assert [r.s for r in session.execute("SELECT s FROM st WHERE k = 1")] == ["changed", "changed"]
    session.execute("INSERT INTO st (k, s) VALUES (2, 'alone')")
    row = session.execute("SELECT * FROM st WHERE k = 2").one()
    assert (row.s, row.c, row.v) == ("alone", None, None)


def test_lightweight_transactions_on_one_node(session):
    session.execute("CREATE TABLE lwt (k int PRIMARY KEY, v int)")
    assert session.execute("INSERT INTO lwt (k, v) VALUES (1, 1) IF NOT EXISTS").one()[0] is True
    r = session.execute("INSERT INTO lwt (k, v) VALUES (1, 2) IF NOT EXISTS").one()
    assert r[0] is False and r.v == 1
    assert session.execute("UPDATE lwt SET v = 3 WHERE k = 1 IF v = 1").one()[0] is True
    r = session.execute("UPDATE lwt SET v = 4 WHERE k = 1 IF v = 1").one()
    assert r[0] is False and r.v == 3
    assert session.execute("DELETE FROM lwt WHERE k = 1 IF EXISTS").one()[0] is True
    assert session.execute("DELETE FROM lwt WHERE k = 1 IF EXISTS").one()[0] is False

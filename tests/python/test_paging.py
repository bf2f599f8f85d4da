"""Paging: 10,000 rows in one partition and across partitions, every row once, in order."""
import pytest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from conftest import new_keyspace_name

ROWS = 10_000


@pytest.fixture(scope="module")
def paged(cluster):
    """Table one: 10,000 rows in partition 0; table many: 100 partitions x 100 rows."""
    s = cluster.connect()
    ks = new_keyspace_name()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    s.set_keyspace(ks)
    s.execute("CREATE TABLE one (k int, c int, v text, PRIMARY KEY (k, c))")
    s.execute("CREATE TABLE many (k int, c int, v text, PRIMARY KEY (k, c))")
    for table, args in (("one", [(0, c, f"v{c}") for c in range(ROWS)]),
                        ("many", [(i // 100, i % 100, f"v{i}") for i in range(ROWS)])):
        ins = s.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
        results = execute_concurrent_with_args(s, ins, args, concurrency=64, raise_on_first_error=True)
        assert all(ok for ok, _ in results)
    yield s
    s.execute(f"DROP KEYSPACE {ks}")
    s.shutdown()


@pytest.mark.parametrize("fetch_size", [100, 1000])
def test_paging_one_partition_returns_every_row_once_in_clustering_order(paged, fetch_size):
    rs = paged.execute(SimpleStatement("SELECT c, v FROM one WHERE k = 0", fetch_size=fetch_size))
    assert len(rs.current_rows) == fetch_size and rs.has_more_pages
    rows = [(r.c, r.v) for r in rs]
    assert rows == [(c, f"v{c}") for c in range(ROWS)]


@pytest.mark.parametrize("fetch_size", [100, 1000])
def test_paging_across_partitions_returns_every_row_once_in_token_order(paged, fetch_size):
    rows = [(r[0], r.k, r.c) for r in paged.execute(
        SimpleStatement("SELECT token(k), k, c FROM many", fetch_size=fetch_size))]
    assert len(rows) == ROWS
    assert len({(k, c) for _, k, c in rows}) == ROWS
    assert rows == sorted(rows), "partitions in token order, rows in clustering order"
    assert {k for _, k, _ in rows} == set(range(100))


@pytest.mark.parametrize("fetch_size", [100, 1000])
def test_paging_a_prepared_statement(paged, fetch_size):
    p = paged.prepare("SELECT c FROM one WHERE k = ? AND c >= ?")
    p.fetch_size = fetch_size
    assert [r.c for r in paged.execute(p, (0, 2500))] == list(range(2500, ROWS))


def test_paging_state_resumes_where_the_last_page_ended(paged):
    st = SimpleStatement("SELECT k, c FROM many", fetch_size=1000)
    seen = []
    rs = paged.execute(st)
    seen += [(r.k, r.c) for r in rs.current_rows]
    pages = 1
    while rs.paging_state is not None:
        rs = paged.execute(st, paging_state=rs.paging_state)
        seen += [(r.k, r.c) for r in rs.current_rows]
        pages += 1
    assert pages == 10 or (pages == 11 and not rs.current_rows)
    assert len(seen) == ROWS and len(set(seen)) == ROWS


def test_paging_respects_limit_and_per_partition_limit(paged):
    rs = paged.execute(SimpleStatement("SELECT c FROM one WHERE k = 0 LIMIT 2500", fetch_size=1000))
    assert [r.c for r in rs] == list(range(2500))
    rs = paged.execute(SimpleStatement("SELECT k, c FROM many PER PARTITION LIMIT 3", fetch_size=100))
    rows = [(r.k, r.c) for r in rs]
    assert len(rows) == 300 and sorted(rows) == [(k, c) for k in range(100) for c in range(3)]


def test_paging_count_and_distinct_over_many_rows(paged):
    assert paged.execute(SimpleStatement("SELECT count(*) FROM many", fetch_size=100)).one()[0] == ROWS
    assert paged.execute(SimpleStatement("SELECT count(*) FROM one WHERE k = 0", fetch_size=100)).one()[0] == ROWS
    ks = sorted(r.k for r in paged.execute(SimpleStatement("SELECT DISTINCT k FROM many", fetch_size=7)))
    assert ks == list(range(100))


def test_paging_in_reverse_clustering_order(paged):
    rs = paged.execute(SimpleStatement("SELECT c FROM one WHERE k = 0 ORDER BY c DESC", fetch_size=1000))
    assert [r.c for r in rs] == list(range(ROWS - 1, -1, -1))


QUERY_RULES = [
    "SELECT k, c1, c2 FROM rules WHERE k IN (3, 1, 7) AND c1 IN (2, 0)",
    "SELECT k, c1, c2 FROM rules WHERE k = 4 AND (c1, c2) > (1, 3) AND (c1, c2) <= (3, 1)",
    "SELECT k, c1, c2 FROM rules WHERE k IN (2, 5) AND (c1, c2) IN ((0, 1), (2, 2), (3, 4))",
    "SELECT k, c1, c2 FROM rules WHERE tags CONTAINS 't1' ALLOW FILTERING",
    "SELECT k, c1, c2 FROM rules WHERE m CONTAINS KEY 'k2' ALLOW FILTERING",
    "SELECT k, c1, c2 FROM rules WHERE c2 = 3 ALLOW FILTERING",
    "SELECT k, c1, c2 FROM rules WHERE v > 50 AND v < 120 ALLOW FILTERING",
    "SELECT k, c1, c2 FROM rules WHERE k IN (1, 2, 3) AND v > 10 ALLOW FILTERING",
    "SELECT k, c1, c2 FROM rules WHERE token(k) > token(1) AND c1 = 1 ALLOW FILTERING",
]


@pytest.mark.parametrize("query", QUERY_RULES)
def test_paging_over_query_rules_returns_what_one_page_returns(paged, query):
    """IN on partitions and clusterings, multi-column relations, CONTAINS and
    filtering: every page size gives the rows of a single page, in order."""
    s = paged
    s.execute("CREATE TABLE IF NOT EXISTS rules (k int, c1 int, c2 int, v int, tags set<text>, m map<text, int>, PRIMARY KEY (k, c1, c2))")
    if not list(s.execute("SELECT k FROM rules LIMIT 1")):
        ins = s.prepare("INSERT INTO rules (k, c1, c2, v, tags, m) VALUES (?, ?, ?, ?, ?, ?)")
        for k in range(8):
            for c1 in range(4):
                for c2 in range(5):
                    n = k * 20 + c1 * 5 + c2
                    s.execute(ins, (k, c1, c2, n, {f"t{n % 3}"}, {f"k{n % 4}": n}))
    whole = list(s.execute(SimpleStatement(query, fetch_size=100_000)))
    assert whole, query
    for fetch_size in (1, 2, 3, 7):
        got = list(s.execute(SimpleStatement(query, fetch_size=fetch_size)))
        assert got == whole, (query, fetch_size)

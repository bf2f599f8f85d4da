"""`sibyl stress` against a real node: each command, user profiles,
distributions, auto thread mode, the summary, the graph."""
import json
import os
import re
import subprocess
import uuid

import pytest
from sibyl_node import BIN

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stress(node, *args, check=True):
    p = subprocess.run([BIN, "stress", *args, "-node", node.host, "-port", f"native={node.port}"], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p


def summary(out):
    m = re.search(r"Op rate\s+:\s+([\d,]+) op/s", out)
    assert m, out
    total = re.search(r"Total partitions\s+:\s+([\d,]+)", out)
    return int(m.group(1).replace(",", "")), int(total.group(1).replace(",", ""))


def test_write_read_and_mixed_commands_report_like_cassandra_stress(node, tmp_path):
    graph = tmp_path / "g.html"
    log = tmp_path / "intervals.jsonl"
    p = stress(node, "write", "n=3000", "no-warmup", "-rate", "threads=8", "-pop", "seq=1..3000", "-log", f"file={log}", "-graph", f"file={graph}", "title=t", "revision=write")
    rate, total = summary(p.stdout)
    assert total == 3000 and rate > 0
    assert "type       total ops,    op/s" in p.stdout
    assert "Latency 99th percentile" in p.stdout and "Client CPU per op" in p.stdout
    assert log.read_text().strip(), "interval log written"
    p = stress(node, "read", "n=2000", "no-warmup", "-rate", "threads=4", "-pop", "seq=1..3000", "-graph", f"file={graph}", "revision=read")
    assert summary(p.stdout)[1] == 2000
    assert re.search(r"Row rate\s+:\s+[\d,]+ row/s", p.stdout)
    p = stress(node, "mixed", "ratio(write=1,read=3)", "duration=2s", "no-warmup", "-rate", "threads=4", "throttle=500/s", "-graph", f"file={graph}", "revision=mixed")
    rate, total = summary(p.stdout)
    assert "[WRITE:" in p.stdout and "READ:" in p.stdout
    assert total <= 1100, "throttled to 500/s for 2 s"
    html = graph.read_text()
    data = json.loads(html.split('<script id="stress-data" type="application/json">')[1].split("</script><!--end-stress-data-->")[0])
    assert [r["revision"] for r in data["revisions"]] == ["write", "read", "mixed"], "runs are overlaid as revisions"
    assert data["title"] == "t"
    assert all(r["intervals"] for r in data["revisions"])


def test_hdr_log_holds_every_operation_with_the_summary_percentiles(node, tmp_path):
    """-log hdrfile=FILE (cassandra-stress's HdrHistogram interval log): one
    tagged histogram per kind and interval; added up, they are the run."""
    import sys

    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import hdrlog

    hdr = tmp_path / "run.hdr"
    p = stress(node, "mixed", "ratio(write=1,read=3)", "n=4000", "no-warmup", "-rate", "threads=8", "-pop", "seq=1..2000", "-log", f"hdrfile={hdr}", "interval=1s")
    lines = hdr.read_text().splitlines()
    assert lines[0].startswith("#") and any(l.startswith("#[BaseTime:") for l in lines)
    tags = {l.split(",", 1)[0] for l in lines if l.startswith("Tag=")}
    assert tags == {"Tag=WRITE", "Tag=READ"}
    merged = hdrlog.read(str(hdr))
    assert merged.total() == 4000
    writes, reads = hdrlog.read(str(hdr), ["WRITE"]), hdrlog.read(str(hdr), ["READ"])
    assert writes.total() + reads.total() == 4000 and writes.total() > 0
    # the summary's percentiles, in 0.1 ms, are the log's rounded
    for label, q in (("median", 0.5), ("99th percentile", 0.99), ("99.9th percentile", 0.999)):
        shown = float(re.search(rf"Latency {re.escape(label)}\s*:\s*([\d.]+) ms", p.stdout).group(1))
        exact = merged.value_at_quantile(q) / 1000
        assert abs(exact - shown) <= 0.05 + 1e-9, (label, exact, shown)


def test_bad_options_are_named():
    for args, word in [(["write", "-bogus"], "-bogus"), (["write", "n=x"], "n=x"), (["fly"], "fly"), (["write", "-rate", "speed=3"], "speed=3")]:
        p = subprocess.run([BIN, "stress", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0
        assert word.split("=")[-1] in p.stderr or word in p.stderr, p.stderr


def per_op(out, line, op):
    """The value for `op` in a summary line such as `Row rate : 9 row/s [insert: 8 row/s, simple1: 1 row/s]`."""
    m = re.search(re.escape(line) + r"\s+:.*\[(.*)\]", out)
    assert m, out
    parts = dict(p.split(": ", 1) for p in m.group(1).split(", "))
    return float(parts[op].split()[0].replace(",", ""))


PROFILE = """
keyspace: {ks}
keyspace_definition: |
  CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
table: readings
table_definition: |
  CREATE TABLE readings (
    source text, day int, at timestamp, id timeuuid,
    kind int, skewed int, value double, big bigint, ok boolean, tag uuid, payload blob, labels set<text>,
    PRIMARY KEY ((source, day), at, id)
  ) WITH CLUSTERING ORDER BY (at DESC, id ASC)
columnspec:
  - name: source
    size: fixed(7)
  - name: day
    population: seq(1..3)
  - name: at
    cluster: uniform(2..3)
  - name: id
    cluster: fixed(2)
  - name: kind
    population: uniform(1..5)
  - name: skewed
    population: ~exp(1..100)
  - name: payload
    size: gaussian(10..30)
  - name: labels
    size: uniform(1..3)
insert:
  partitions: fixed(1)
  select: fixed(1)/1
  batchtype: UNLOGGED
queries:
  simple1:
    cql: SELECT * FROM readings WHERE source = ? AND day = ? LIMIT 10
    fields: samerow
  range1:
    cql: select at, value from readings where source = ? and day = ? and at >= ? LIMIT 100
    fields: multirow
"""


def write_profile(tmp_path, text):
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    return str(path)


def test_user_profile_inserts_generated_rows_and_runs_named_queries(node, cluster, tmp_path):
    ks = "stress_" + uuid.uuid4().hex[:10]
    profile = write_profile(tmp_path, PROFILE.format(ks=ks))
    p = stress(node, "user", f"profile={profile}", "ops(insert=1)", "n=200", "no-warmup", "-rate", "threads=4")
    assert "Generating batches with [1..1] partitions and [4..6] rows (of [4..6] total rows in the partitions)" in p.stdout
    assert per_op(p.stdout, "Total partitions", "insert") == 200
    rows_written = per_op(p.stdout, "Row rate", "insert")
    assert rows_written > 0
    s = cluster.connect(ks)
    try:
        rows = list(s.execute("SELECT * FROM readings"))
        partitions = {(r.source, r.day) for r in rows}
        assert len(partitions) == 200, "seq=1..200 by default for insert-only profiles: one partition each"
        per_partition = {}
        for r in rows:
            per_partition[(r.source, r.day)] = per_partition.get((r.source, r.day), 0) + 1
        # at: uniform(2..3) values, each with id: fixed(2) children, every row selected
        assert set(per_partition.values()) <= {4, 6} and len(set(per_partition.values())) == 2
        assert all(len(r.source) == 7 for r in rows), "size: fixed(7)"
        assert {r.day for r in rows} <= {1, 2, 3}, "population: seq(1..3)"
        assert {r.kind for r in rows} <= {1, 2, 3, 4, 5} and len({r.kind for r in rows}) > 1, "population: uniform(1..5)"
        skewed = [r.skewed for r in rows]
        assert all(1 <= v <= 100 for v in skewed) and sum(skewed) / len(skewed) > 55, "~exp(1..100) favours the top"
        assert all(10 <= len(r.payload) <= 30 for r in rows), "size: gaussian(10..30)"
        assert all(r.labels and 1 <= len(r.labels) <= 3 for r in rows), "a set of uniform(1..3) elements"
        assert all(r.id.version == 1 and r.tag.version == 4 for r in rows)
        assert all(isinstance(r.ok, bool) and isinstance(r.big, int) for r in rows)
    finally:
        s.shutdown()
    # the same seeds find the same partitions: every simple1 query returns rows
    p = stress(node, "user", f"profile={profile}", "ops(simple1=3,range1=1)", "n=200", "no-warmup", "-rate", "threads=4", "-pop", "seq=1..200")
    assert "[simple1: " in p.stdout and "range1: " in p.stdout
    simple = per_op(p.stdout, "Total partitions", "simple1")
    assert simple == 150, "every simple1 query found its partition"
    assert per_op(p.stdout, "Total errors", "range1") == 0
    # 90/10 as the studies ran it, unquoted parentheses and all
    p = stress(node, "user", f"profile={profile}", "ops(insert=9,", "simple1=1)", "duration=2s", "no-warmup", "-rate", "threads=4")
    assert per_op(p.stdout, "Op rate", "insert") > per_op(p.stdout, "Op rate", "simple1") > 0


def test_sample_bench_profile_runs(node, tmp_path):
    graph = tmp_path / "g.html"
    p = stress(node, "user", f"profile={ROOT}/bench/profiles/write-heavy-90-10.yaml", "ops(insert=9,simple1=1)", "n=300", "no-warmup",
               "-rate", "threads=4", "-graph", f"file={graph}", "revision=stcs")
    assert per_op(p.stdout, "Total partitions", "insert") == 270
    assert "revision" in graph.read_text() and "stcs" in graph.read_text()


@pytest.mark.parametrize("change, word", [
    (lambda t: t.replace("table: readings\n", ""), "table name is required"),
    (lambda t: t.replace("keyspace: {ks}\n", ""), "keyspace name is required"),
    (lambda t: t.replace("gaussian(10..30)", "gaussian(30..10)"), "columnspec payload size"),
    (lambda t: t.replace("~exp(1..100)", "zipf(1..100)"), "Illegal distribution type: zipf"),
    (lambda t: t.replace("batchtype: UNLOGGED", "batchtype: SOMETIMES"), "SOMETIMES"),
    (lambda t: t.replace("select: fixed(1)/1", "selects: fixed(1)/1"), "Unrecognised insert option(s): selects"),
    (lambda t: t.replace("table: readings", "table: other"), "doesn't match table property"),
    (lambda t: t + "bogus_key: 1\n", "bogus_key"),
    (lambda t: t.replace("    fields: samerow", "    fields: everyrow"), "everyrow"),
    (lambda t: t.replace("queries:", "queries: [\n"), "profile"),
])
def test_profile_errors_name_the_problem(tmp_path, change, word):
    profile = write_profile(tmp_path, change(PROFILE).format(ks="ks_never_created"))
    # nothing listens on port 1: the profile is checked before any connection
    p = subprocess.run([BIN, "stress", "user", f"profile={profile}", "ops(insert=1)", "n=10", "-port", "native=1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert word in p.stderr and profile in p.stderr, p.stderr


def test_unknown_operations_and_missing_profiles_are_named(tmp_path):
    profile = write_profile(tmp_path, PROFILE.format(ks="ks_never_created"))
    for args, word in [
        (["user", f"profile={profile}", "ops(insert=1,simple2=1)"], "No query defined with name simple2"),
        (["user", f"profile={tmp_path}/missing.yaml", "ops(insert=1)"], "missing.yaml"),
        (["user", "ops(insert=1)"], "profile="),
        (["user", f"profile={profile}"], "ops("),
    ]:
        p = subprocess.run([BIN, "stress", *args, "n=10", "-port", "native=1"], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0 and word in p.stderr, (args, p.stderr)


def test_distribution_options(node):
    p = stress(node, "write", "n=400", "no-warmup", "-rate", "threads=4", "-pop", "dist=UNIFORM(1..50)", "-col", "n=UNIFORM(1..5)", "size=GAUSSIAN(10..30)")
    assert summary(p.stdout)[1] == 400
    p = stress(node, "read", "n=300", "no-warmup", "-rate", "threads=4", "-pop", "dist=~EXP(1..50)")
    assert summary(p.stdout)[1] > 0, "reads over the written keys find rows"
    for args, word in [
        (["-pop", "dist=UNIFORM(50..1)"], "-pop dist=UNIFORM(50..1)"),
        (["-pop", "dist=POISSON(1..9)"], "POISSON"),
        (["-col", "size=EXTREME(1..9)"], "extreme"),
        (["-col", "n=GAUSS(1..x)"], "n=GAUSS(1..x)"),
    ]:
        p = stress(node, "write", "n=10", *args, check=False)
        assert p.returncode != 0 and word in p.stderr, (args, p.stderr)


def test_auto_thread_mode_runs_rounds_until_the_limit_and_summarises(node, tmp_path):
    graph = tmp_path / "auto.html"
    p = stress(node, "write", "n=300", "no-warmup", "-rate", "threads>=1", "threads<=4", "auto", "-graph", f"file={graph}", "revision=auto")
    out = p.stdout
    for t in (1, 2, 4):
        assert f"Running with {t} threadCount" in out and f"Running WRITE with {t} threads for 300 iteration" in out
    assert "Running with 8 threadCount" not in out, "threads<=4"
    assert "Improvement over 1 threadCount:" in out and "Improvement over 2 threadCount:" in out
    table = [l for l in out.splitlines() if re.match(r"^\d+ threadCount, total,", l)]
    assert len(table) == 3, out
    assert all(int(l.split(",")[2]) == 300 for l in table)
    assert re.search(r"Best: \d+ threadCount at [\d,]+ op/s", out)
    assert out.rstrip().endswith("END")
    data = json.loads(graph.read_text().split('<script id="stress-data" type="application/json">')[1].split("</script><!--end-stress-data-->")[0])
    assert [r["revision"] for r in data["revisions"]] == ["auto (1 threads)", "auto (2 threads)", "auto (4 threads)"]


def test_counter_write_and_read(node, cluster):
    s = cluster.connect()
    try:
        keys = [bytes(2) + i.to_bytes(8, "big") for i in range(1, 51)]

        def counters():
            if not s.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'keyspace1' AND table_name = 'counter1'").one():
                return {}
            return {r.key: r.C0 for r in s.execute('SELECT key, "C0" FROM keyspace1.counter1') if r.key in keys}

        before = counters()
        p = stress(node, "counter_write", "n=150", "add=FIXED(2)", "no-warmup", "-rate", "threads=4", "-pop", "seq=1..50")
        assert "COUNTER_WRITE: " in p.stdout and summary(p.stdout)[1] == 150
        after = counters()
        assert len(after) == 50
        assert all(after[k] - before.get(k, 0) == 6 for k in keys), "three increments of 2 per key"
        p = stress(node, "counter_read", "n=100", "no-warmup", "-rate", "threads=4", "-pop", "seq=1..50")
        assert "COUNTER_READ: " in p.stdout
        assert per_op(p.stdout, "Row rate", "COUNTER_READ") > 0 and per_op(p.stdout, "Total partitions", "COUNTER_READ") == 100
    finally:
        s.shutdown()


def test_compression_credentials_and_several_nodes(node):
    for comp in ("lz4", "snappy", "none"):
        p = stress(node, "write", "n=200", "no-warmup", "-rate", "threads=4", "-mode", "native", "cql3", "prepared", f"compression={comp}")
        assert summary(p.stdout)[1] == 200
    # a server without authentication ignores the credentials
    p = stress(node, "read", "n=100", "no-warmup", "-pop", "seq=1..100", "-rate", "threads=2", "-mode", "native", "cql3", "prepared", "user=cassandra", "password=cassandra")
    assert summary(p.stdout)[1] == 100
    # the same node twice: the ring read from system.local/peers routes every token to it
    p = subprocess.run([BIN, "stress", "write", "n=200", "no-warmup", "-rate", "threads=4", "-node", f"{node.host},{node.host}", "-port", f"native={node.port}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Token-aware routing: on" in p.stdout and summary(p.stdout)[1] == 200


def chromium():
    import shutil
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not chromium(), reason="no chromium (scripts/test.sh installs it where apt-get works)")
def test_graph_renders_names_as_text_in_a_real_browser(node, tmp_path):
    """Issue 18, item 16: revision and command went into innerHTML unescaped.
    The page is loaded in headless chromium: the markup in a revision name
    shows as text, creates no element, and the page draws (a screenshot)."""
    graph = tmp_path / "g.html"
    evil = "</script><img id=injected src=x onerror=alert(1)><b>bold</b>"
    stress(node, "write", "n=500", "no-warmup", "-rate", "threads=2", "-graph", f"file={graph}", f"revision={evil}", "title=<i>t</i>")
    run = lambda *a: subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", *a, f"file://{graph}"],
                                    capture_output=True, text=True, timeout=120)
    dom = run("--dump-dom").stdout
    assert "id=\"legend\"" in dom and "</canvas>" in dom
    assert "<img" not in dom and "<b>bold</b>" not in dom, "markup from a name became elements"
    assert "&lt;b&gt;bold&lt;/b&gt;" in dom, "the name is shown as text"
    shot = tmp_path / "g.png"
    run(f"--screenshot={shot}", "--window-size=1200,900")
    assert shot.exists() and shot.stat().st_size > 10_000


def test_stress_on_a_fresh_three_node_cluster_finds_every_node_waits_for_the_schema_and_retries(tmp_path):
    """Issue 21, item 9: cassandra-stress's behaviour on a cluster. Given one
    node, it finds the other two (system.peers); its CREATE KEYSPACE/TABLE is
    followed by a wait for schema agreement, so no node refuses the first
    writes; an operation that fails is tried again (`-errors retries=N`)."""
    from local_cluster import LocalCluster
    lc = LocalCluster(tmp_path, 3)
    try:
        lc.run("start")
        p = subprocess.run([BIN, "stress", "write", "n=3000", "no-warmup", "cl=QUORUM", "-rate", "threads=8",
                            "-schema", "replication(factor=3)", "-node", "127.0.0.1", "-port", f"native={lc.port}"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        assert "Found 2 more nodes in the cluster" in p.stdout, p.stdout[:2000]
        assert "Token-aware routing: on" in p.stdout
        assert summary(p.stdout)[1] == 3000
        assert re.search(r"Total errors\s+:\s+0 ", p.stdout), p.stdout[-2000:]
        # every node took writes as a replica (RF 3)
        for n in (1, 2, 3):
            stats = lc.nodetool(n, "tablestats", "-F", "json", "keyspace1.standard1")
            assert json.loads(stats)["keyspace1"]["write_count"] >= 3000 * 0.9, (n, stats)
        # -node whitelist: only the node given
        p = subprocess.run([BIN, "stress", "read", "n=500", "no-warmup", "-rate", "threads=4", "-pop", "seq=1..500",
                            "-node", "whitelist", "127.0.0.2", "-port", f"native={lc.port}"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        assert "more nodes" not in p.stdout
        # a node killed under load: the failed operations are retried, on
        # the others, and the run ends without errors
        lc.run("kill", "node3")
        p = subprocess.run([BIN, "stress", "write", "n=2000", "no-warmup", "cl=ONE", "-rate", "threads=8",
                            "-errors", "retries=10", "-node", "127.0.0.1", "-port", f"native={lc.port}"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        assert summary(p.stdout)[1] == 2000
        bad = subprocess.run([BIN, "stress", "write", "n=10", "-errors", "retries=x", "-node", "127.0.0.1"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode != 0 and "Invalid -errors option 'retries=x'" in bad.stdout + bad.stderr
    finally:
        lc.stop()

"""Issue 21, item 3: every node serves its metrics in the Prometheus text
format on the admin port (`GET /metrics`), with the families and labels of
instaclustr's cassandra-exporter. A real Prometheus (Debian's package)
scrapes three real nodes; each row of what operators watch (seed 000,
Tables 4.1-4.3) must have a series, and so must every family the exporter's
own Grafana dashboards query (tests/golden/prometheus/), but the ones Sibyl
names as absent."""
import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement

import goldens
from local_cluster import LocalCluster, wait_for
from sibyl_node import free_port

# seed 000, Table 4.3 (and 4.1-4.2: the process), row by row: the PromQL an
# operator's dashboard or alert would use
ROWS = {
    "node state: operation mode": 'cassandra_endpoint_info{state="NORMAL"}',
    "node state: live and unreachable nodes": "cassandra_endpoint_active",
    "node state: Cassandra versions": 'cassandra_endpoint_info{release_version="5.0.4"}',
    "node state: schema mismatches": "count(count by (schema_version) (cassandra_endpoint_info))",
    "client requests: timeouts": "cassandra_client_request_timeouts_total",
    "client requests: failures": "cassandra_client_request_failures_total",
    "client requests: latencies": 'cassandra_client_request_latency_seconds{quantile="0.99"}',
    "client requests: throughput": "rate(cassandra_client_request_latency_seconds_count[1m])",
    "client requests: client connections": "cassandra_client_native_connections",
    "client requests: commit log size": "cassandra_commit_log_size_bytes",
    "internode: dropped messages and their types": "cassandra_dropped_messages_total",
    "internode: timeouts per host": "cassandra_endpoint_connection_timeouts_total",
    "internode: cross-node latency": 'cassandra_endpoint_connection_latency_seconds{quantile="0.99"}',
    "internode: dropped mutations": 'cassandra_dropped_messages_total{message_type="MUTATION_REQ"}',
    "storage: exceptions": "cassandra_storage_exceptions_total",
    "storage: load": "cassandra_storage_load_bytes",
    "storage: hints in progress": "cassandra_storage_hints_total",
    "storage: hints on disk": "cassandra_hints_on_disk_bytes",
    "storage: column family latencies": 'cassandra_table_operation_latency_seconds{keyspace="m",quantile="0.99"}',
    "storage: partition sizes": 'cassandra_table_estimated_partition_size_bytes{keyspace="m"}',
    "repairs: read repairs executed": "cassandra_read_repair_repaired_blocking_total",
    "repairs: share of SSTables repaired": 'cassandra_table_repaired_ratio{keyspace="m"}',
    "thread pools: active": "cassandra_thread_pool_active_tasks",
    "thread pools: pending": "cassandra_thread_pool_pending_tasks",
    "thread pools: completed": "cassandra_thread_pool_completed_tasks_total",
    "thread pools: blocked": "cassandra_thread_pool_blocked_tasks_total",
    "compactions: pending": "cassandra_table_estimated_pending_compactions",
    "compactions: completed": "cassandra_compaction_completed_tasks_total",
    "compactions: bytes compacted": "cassandra_compaction_bytes_compacted_total",
    "process: CPU": "cassandra_process_recent_cpu_load_ratio",
    "process: memory": "cassandra_process_resident_memory_bytes",
    "machine: load": "cassandra_os_1m_load_average",
}


def dashboard_families():
    out = {}
    with open(os.path.join(goldens.GOLDEN, "prometheus", "instaclustr_dashboard_metrics.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _, why = line.partition("|")
            out[name.strip()] = why.strip() or None
    return out


class Prometheus:
    def __init__(self, tmp_path, targets):
        exe = shutil.which("prometheus")
        assert exe, "Prometheus is not installed: scripts/test.sh installs Debian's prometheus package"
        self.port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: sibyl\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n")
        self.log = open(tmp_path / "prometheus.log", "w")
        self.p = subprocess.Popen(
            [exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, q):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except OSError:
            return []
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, q):
        r = self.query(q)
        return float(r[0]["value"][1]) if r else None

    def stop(self):
        self.p.terminate()
        self.p.wait(timeout=30)
        self.log.close()


def test_prometheus_scrapes_three_nodes_and_every_watched_row_has_a_series(tmp_path):
    lc = LocalCluster(tmp_path, 3)
    prom = None
    try:
        lc.run("start")
        targets = [f"127.0.0.{n}:{lc.admin_port}" for n in (1, 2, 3)]
        # the format itself, as Prometheus's own checker reads it
        with urllib.request.urlopen(f"http://127.0.0.1:{lc.admin_port}/metrics", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read()
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
        problems = [l for l in check.stderr.decode().splitlines() if l.strip()]
        # the exporter's own names break two naming rules; dashboards depend on them
        assert all("_total\" suffix" in l for l in problems), problems
        prom = Prometheus(tmp_path, targets)
        c, s = lc.connect(1, whitelist=True)  # node 1 coordinates every request
        try:
            s.execute("CREATE KEYSPACE m WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute("CREATE TABLE m.t (k int PRIMARY KEY, v text)")
            ins = s.prepare("INSERT INTO m.t (k, v) VALUES (?, ?)")
            ins.consistency_level = ConsistencyLevel.QUORUM
            sel = s.prepare("SELECT v FROM m.t WHERE k = ?")
            sel.consistency_level = ConsistencyLevel.QUORUM
            for i in range(200):
                s.execute(ins, (i, "x" * 100))
            for i in range(200):
                assert s.execute(sel, (i,)).one().v == "x" * 100
            s.execute(SimpleStatement("SELECT count(*) FROM m.t", consistency_level=ConsistencyLevel.ONE))
            # two SSTables, then one: partition sizes, flushes and a compaction
            lc.nodetool(1, "flush", "m")
            for i in range(200, 300):
                s.execute(ins, (i, "y" * 100))
            lc.nodetool(1, "flush", "m")
            lc.nodetool(1, "compact", "m")
            # node 3 goes away: node 1 sees it down and keeps hints for it
            lc.run("stop", "node3")
            for i in range(300, 400):
                s.execute(ins, (i, "z" * 100))
            wait_for("node 1 to see node 3 down in Prometheus", lambda: prom.value(
                'cassandra_endpoint_active{cassandra_node="127.0.0.1",endpoint="127.0.0.3"}') == 0,
                timeout=60, every=1)
            wait_for("Prometheus to see node 3's scrape fail", lambda: prom.value(
                f'up{{instance="127.0.0.3:{lc.admin_port}"}}') == 0, timeout=30, every=1)
            wait_for("a scrape after the writes", lambda: (prom.value(
                'sum(cassandra_client_request_latency_seconds_count{cassandra_node="127.0.0.1",'
                'operation="write",consistency="QUORUM"})') or 0) >= 400, timeout=30, every=1)
        finally:
            c.shutdown()
        # a loaded machine may not have scraped every node yet
        wait_for("Prometheus to see nodes 1 and 2 up", lambda: all(
            prom.value(f'up{{instance="{t}"}}') == 1 for t in targets[:2]), timeout=60, every=1)
        up = {r["metric"]["instance"]: r["value"][1] for r in prom.query("up")}
        assert up[targets[0]] == "1" and up[targets[1]] == "1", up
        # a rate needs two scrapes of a series
        missing = list(ROWS)
        deadline = time.time() + 30
        while missing and time.time() < deadline:
            missing = [row for row in missing if not prom.query(ROWS[row])]
            time.sleep(1)
        assert not missing, missing
        # figures that must be what happened
        assert prom.value('count(count by (schema_version) (cassandra_endpoint_info{cassandra_node="127.0.0.1"}))') == 1
        assert prom.value('cassandra_endpoint_active{cassandra_node="127.0.0.1",endpoint="127.0.0.2"}') == 1
        reads = prom.value('cassandra_client_request_latency_seconds_count{cassandra_node="127.0.0.1",'
                           'operation="read",consistency="QUORUM"}')
        assert reads >= 200, reads
        assert prom.value('cassandra_compaction_completed_tasks_total{cassandra_node="127.0.0.1"}') >= 1
        assert prom.value('sum(cassandra_hints_on_disk_bytes{cassandra_node="127.0.0.1"})') > 0
        assert prom.value('sum(cassandra_table_live_sstables{cassandra_node="127.0.0.1",keyspace="m"})') == 1
        assert prom.value('cassandra_thread_pool_completed_tasks_total{cassandra_node="127.0.0.2",'
                          'pool="MutationStage"}') >= 300
        # the exporter's dashboards: every family they query, but the named absent ones
        families = dashboard_families()
        absent = [f for f, why in families.items() if why is None and not prom.query(f)]
        assert not absent, absent
        named = [f for f, why in families.items() if why is not None and prom.query(f)]
        assert not named, f"now produced: remove them from the golden's absent list: {named}"
    finally:
        if prom:
            prom.stop()
        lc.stop()

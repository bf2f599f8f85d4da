"""`sibyl stress` against a real node: each command, the summary, the graph."""
import json
import re
import subprocess

from sibyl_node import BIN


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


def test_bad_options_are_named():
    for args, word in [(["write", "-bogus"], "-bogus"), (["write", "n=x"], "n=x"), (["fly"], "fly"), (["write", "-rate", "speed=3"], "speed=3")]:
        p = subprocess.run([BIN, "stress", *args], capture_output=True, text=True, timeout=30)
        assert p.returncode != 0
        assert word.split("=")[-1] in p.stderr or word in p.stderr, p.stderr

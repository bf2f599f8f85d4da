"""The CQL conformance corpus: scripts of statements whose answers were
recorded from Apache Cassandra 5.0.4 and are replayed against Sibyl.

    python tests/python/cql_corpus.py --record --port 9043   # record goldens from Cassandra
    python tests/python/cql_corpus.py --port 9042            # compare a server with the goldens

Each `tests/cql/NAME.cql` holds statements separated by `;` at the end of a
line; `-- ` lines are comments. The answer of each statement is written to
`tests/cql/NAME.expected`: rows, or the error class and message.
"""
import argparse
import difflib
import os
import sys

from cassandra.cluster import Cluster
from cassandra.query import SimpleStatement

CORPUS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cql")


def statements(text):
    buf = []
    for line in text.splitlines():
        if line.strip().startswith("--") and not buf:
            continue
        buf.append(line)
        if line.rstrip().endswith(";"):
            st = "\n".join(buf).strip()
            buf = []
            if st.upper().startswith("BEGIN") and "APPLY BATCH" not in st.upper():
                buf = [st]
                continue
            yield st.rstrip(";").strip()
    if "".join(buf).strip():
        yield "\n".join(buf).strip()


def render_value(v):
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(render_value(x) for x in v)) + "}"
    if isinstance(v, dict) or type(v).__name__ == "OrderedMapSerializedKey":
        return "{" + ", ".join(f"{render_value(k)}: {render_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
        inner = ", ".join(render_value(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if hasattr(v, "_fields"):
        return "{" + ", ".join(f"{f}: {render_value(getattr(v, f))}" for f in v._fields) + "}"
    return repr(v)


def wait_for_index_builds(session, ks):
    """Cassandra builds a new index in the background and fails reads until it
    is done; Sibyl builds it before CREATE INDEX returns. When recording, wait
    until every index of the keyspace is listed as built."""
    import time
    deadline = time.time() + 30
    while time.time() < deadline:
        want = {r.index_name for r in session.execute(
            "SELECT index_name FROM system_schema.indexes WHERE keyspace_name = %s", [ks])}
        built = {r.index_name for r in session.execute(
            'SELECT index_name FROM system."IndexInfo" WHERE table_name = %s', [ks])}
        if want <= built:
            return
        time.sleep(0.2)


def normalize(line):
    """Cassandra lists a function's known type signatures in hash order, which
    changes from one JVM run to the next: compare them sorted."""
    marker = "(known type signatures: "
    i = line.find(marker)
    if i < 0:
        return line
    j = line.find(")\"", i)
    if j < 0:
        return line
    sigs = sorted(line[i + len(marker):j].split(", "))
    return line[:i + len(marker)] + ", ".join(sigs) + line[j:]


def run_file(session, path, record=False):
    name = os.path.splitext(os.path.basename(path))[0]
    ks = f"corpus_{name}"
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    session.set_keyspace(ks)
    out = []
    with open(path) as f:
        text = f.read()
    for st in statements(text):
        out.append(f"> {st}")
        try:
            rs = session.execute(SimpleStatement(st, fetch_size=1000))
            for w in rs.response_future.warnings or []:
                out.append(f"WARNING {w}")
            names = rs.column_names
            if names:
                out.append(" | ".join(names))
                for row in rs:
                    out.append(" | ".join(render_value(v) for v in row))
            else:
                out.append("OK")
                if record and st.upper().startswith("CREATE") and " INDEX " in f" {st.upper()} ":
                    wait_for_index_builds(session, ks)
        except Exception as e:  # the error class and message are the answer
            msg = getattr(e, "message", None) or str(e)
            out.append(normalize(f"ERROR {type(e).__name__}: {msg}"))
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9042)
    ap.add_argument("--record", action="store_true", help="write the answers as the new goldens")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    files = a.files or sorted(os.path.join(CORPUS, f) for f in os.listdir(CORPUS) if f.endswith(".cql"))
    cluster = Cluster([a.host], port=a.port, protocol_version=5)
    session = cluster.connect()
    failed = 0
    for path in files:
        got = run_file(session, path, a.record)
        exp_path = path[:-4] + ".expected"
        if a.record:
            with open(exp_path, "w") as f:
                f.write(got)
            print(f"recorded {exp_path}")
            continue
        with open(exp_path) as f:
            exp = f.read()
        if got != exp:
            failed += 1
            sys.stdout.writelines(difflib.unified_diff(exp.splitlines(True), got.splitlines(True), exp_path, "got"))
    cluster.shutdown()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Histories of register operations against a cluster, for the
linearizability checker in tests/linearizability (Porcupine).

A `History` is shared by the client threads of a test; each thread records
through its own `Process`:

    h = History()
    p = h.process()
    p.write("k1", 7, lambda: session.execute(insert, ("k1", 7)))
    p.read("k1", lambda: value_of(session.execute(select, ("k1",)).one()))
    p.cas("k1", 7, 8, lambda: applied_and_value(session.execute(update, (8, "k1", 7)).one()))
    h.save(path)
    ok, output = check(path)

Call and return times are `time.monotonic_ns()`. Outcomes:
- an answer: recorded with its output;
- a definite failure (Unavailable: Cassandra refused before doing anything)
  is not recorded at all: the operation did not happen;
- a timeout, a lost connection, an error the server gave after it may
  have started, is indeterminate: recorded with the output
  "unknown" and no return time (the checker makes it return at the end of
  history). As in Jepsen, the process that issued it is then considered
  crashed and the thread goes on as a new process (a new client id), so that
  no client has two operations in flight;
- an invalid request, or an exception of the test's own code, is raised.
"""
import atexit
import collections
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from cassandra import DriverException, RequestValidationException, Unavailable
from cassandra.cluster import NoHostAvailable
from cassandra.connection import ConnectionException
from cassandra.protocol import ErrorMessage, IsBootstrappingErrorMessage, OverloadedErrorMessage

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECKER_SRC = os.path.join(ROOT, "tests", "linearizability")

# errors that prove the operation was never carried out: the coordinator
# refused it before doing anything
DEFINITE = (Unavailable, OverloadedErrorMessage, IsBootstrappingErrorMessage)
# errors after which it may or may not have been: timeouts, failures,
# connections lost, server errors; anything else (an invalid request, a bug
# in the test) is raised
INDETERMINATE = (DriverException, NoHostAvailable, ConnectionException, ErrorMessage)


class History:
    def __init__(self):
        self.ops = []
        self.errors = collections.Counter()  # "kind outcome" -> count, for reports
        self._lock = threading.Lock()
        self._next_client = 0

    def process(self):
        return Process(self)

    def _client_id(self):
        with self._lock:
            c = self._next_client
            self._next_client += 1
            return c

    def _add(self, op, note):
        with self._lock:
            if op is not None:
                self.ops.append(op)
            self.errors[note] += 1

    def save(self, path):
        with self._lock:
            ops = sorted(self.ops, key=lambda o: o["call"])
        with open(path, "w") as f:  # one operation a line
            f.write("[\n" + ",\n".join(json.dumps(o) for o in ops) + "\n]\n")
        return path

    # ---- what a test asserts on

    def completed(self, kind=None, between=None):
        """Operations with a known outcome (of `kind`), called within
        `between` = (start_ns, end_ns) when given."""
        with self._lock:
            ops = list(self.ops)
        return [o for o in ops if o["output"] != "unknown" and (kind is None or o["kind"] == kind)
                and (between is None or between[0] <= o["call"] <= between[1])]

    def indeterminate(self, kind=None):
        with self._lock:
            return [o for o in self.ops if o["output"] == "unknown" and (kind is None or o["kind"] == kind)]

    def summary(self):
        by_kind = collections.Counter(o["kind"] for o in self.completed())
        return (f"{len(self.completed())} completed ({dict(by_kind)}), {len(self.indeterminate())} indeterminate; "
                f"outcomes {dict(self.errors)}")


class Process:
    """One client thread's view of the history: a client id that changes
    after each indeterminate operation."""

    def __init__(self, history):
        self.history = history
        self.client = history._client_id()

    def _do(self, key, kind, inp, f):
        call = time.monotonic_ns()
        try:
            out = f()
        except DEFINITE as e:
            self.history._add(None, f"{kind} {type(e).__name__}")
            return None
        except RequestValidationException:
            raise
        except INDETERMINATE as e:
            self.history._add({"client": self.client, "key": key, "kind": kind, "input": inp, "output": "unknown",
                               "call": call, "return": None, "error": f"{type(e).__name__}: {e}"[:300]},
                              f"{kind} {type(e).__name__}")
            self.client = self.history._client_id()
            return None
        ret = time.monotonic_ns()
        self.history._add({"client": self.client, "key": key, "kind": kind, "input": inp, "output": out,
                           "call": call, "return": ret}, f"{kind} ok")
        return out

    def read(self, key, f):
        """`f()` returns the value read (None: no row). Returns {"value": v},
        or None when the read failed."""
        return self._do(key, "read", {}, lambda: {"value": f()})

    def write(self, key, value, f):
        """`f()` writes `value`. Returns {} when acknowledged, None otherwise."""
        return self._do(key, "write", {"value": value}, lambda: (f(), {})[1])

    def cas(self, key, expected, new, f):
        """`f()` sets the register to `new` if it holds `expected` (None: no
        row) and returns (applied, value seen) — the value only matters when
        not applied. Returns {"applied": a, "value": v} (no "value" when
        applied), or None when the outcome is not known."""
        def go():
            applied, seen = f()
            return {"applied": True} if applied else {"applied": False, "value": seen}
        return self._do(key, "cas", {"expected": expected, "new": new}, go)


# ---- the checker

_checker = None
_checker_lock = threading.Lock()


def go_binary():
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)


def checker_binary():
    """Builds tests/linearizability once per test session, into a temporary
    directory removed at exit (Go's own build cache makes later sessions
    fast)."""
    global _checker
    with _checker_lock:
        if _checker is None:
            go = go_binary()
            if go is None:
                raise RuntimeError("the linearizability checker needs Go (https://go.dev/dl/) on PATH")
            tmp = tempfile.mkdtemp(prefix="sibyl-checker-")
            atexit.register(shutil.rmtree, tmp, True)
            out = os.path.join(tmp, "checker")
            p = subprocess.run([go, "build", "-o", out, "."], cwd=CHECKER_SRC, capture_output=True, text=True,
                               timeout=600, env={**os.environ, "GOFLAGS": "-buildvcs=false", "GOMAXPROCS": "2"})
            if p.returncode != 0:
                raise RuntimeError(f"go build of the checker failed:\n{p.stdout}{p.stderr}")
            _checker = out
        return _checker


def check(path, timeout="120s"):
    """Runs the checker on a saved history: (linearizable, its output)."""
    p = subprocess.run([checker_binary(), "-timeout", timeout, path], capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    if p.returncode not in (0, 1):
        raise RuntimeError(f"the checker could not decide (exit {p.returncode}):\n{out}")
    return p.returncode == 0, out

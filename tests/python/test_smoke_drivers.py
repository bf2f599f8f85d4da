"""Smoke tests with gocql, the Java driver 4.x and the Node.js driver: connect,
DDL, prepared insert and select, paging over 1000 rows."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(cmd, cwd, node, timeout=900):
    env = dict(os.environ, SIBYL_HOST=node.host, SIBYL_PORT=str(node.port))
    p = subprocess.run(cmd, cwd=os.path.join(ROOT, cwd), env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def need(tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")


def test_gocql_smoke(node):
    need("go")
    out = run(["go", "test", "-count=1", "-v", "./..."], "tests/go", node)
    assert "--- PASS: TestGocqlSmoke" in out


def test_java_driver_smoke(node):
    need("mvn")
    out = run(["mvn", "-q", "compile", "exec:java"], "tests/java", node)
    assert "1 passed, 0 failed" in out


def test_node_driver_smoke(node):
    need("npm")
    run(["npm", "install", "--silent", "--no-audit", "--no-fund"], "tests/node", node)
    out = run(["node", "--test", "smoke.test.js"], "tests/node", node)
    assert "# pass 1" in out

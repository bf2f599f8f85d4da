"""Smoke tests with gocql, the Java driver 4.x and the Node.js driver
(scripts/smoke_{go,java,node}.sh): connect, DDL, prepared insert and select,
paging over 1000 rows. Each is skipped when its toolchain is missing."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def smoke(lang, tool, node):
    if not shutil.which(tool):
        pytest.skip(f"{tool} is not installed")
    script = os.path.join(ROOT, "scripts", f"smoke_{lang}.sh")
    p = subprocess.run([script, node.host, str(node.port)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_gocql_smoke(node):
    assert "--- PASS" in smoke("go", "go", node)


def test_java_driver_smoke(node):
    smoke("java", "mvn", node)


def test_node_driver_smoke(node):
    smoke("node", "npm", node)

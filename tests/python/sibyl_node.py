"""Start and stop real `sibyl` processes for tests."""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("SIBYL_BIN", os.path.join(ROOT, "target", "debug", "sibyl"))


_given = set()


def free_port():
    """A port below the kernel's ephemeral range (32768 and up here), so no
    outbound connection can take it between this check and the node's bind;
    never the same one twice in a run."""
    import random
    while True:
        port = random.randint(10000, 32000)
        if port in _given:
            continue
        try:
            with socket.socket() as s:
                s.bind(("0.0.0.0", port))
        except OSError:
            continue
        _given.add(port)
        return port


_OWNED_DIRS = []


@atexit.register
def _remove_owned_dirs():
    for d in _OWNED_DIRS:
        shutil.rmtree(d, ignore_errors=True)


class SibylNode:
    """A `sibyl` process with its own data directory and port."""

    def __init__(self, data_dir=None, port=None, extra_config=""):
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.admin_port = free_port()
        self.storage_port = free_port()
        if data_dir is None:
            data_dir = tempfile.mkdtemp(prefix="sibyl-test-")
            # removed when the test run ends: a run leaves no data behind
            _OWNED_DIRS.append(data_dir)
        self.data_dir = data_dir
        self.extra_config = extra_config
        self.extra_args = []
        self.proc = None
        self.log_path = os.path.join(self.data_dir, "sibyl.log")

    def config_path(self):
        path = os.path.join(self.data_dir, "sibyl.yaml")
        with open(path, "w") as f:
            f.write(
                f"cluster_name: test\n"
                f"listen_address: {self.host}\n"
                f"rpc_address: {self.host}\n"
                f"native_transport_port: {self.port}\n"
                f"admin_port: {self.admin_port}\n"
                f"storage_port: {self.storage_port}\n"
                f"data_file_directories: [{self.data_dir}/data]\n"
                f"commitlog_directory: {self.data_dir}/commitlog\n"
                + (self.extra_config if "commitlog_sync:" in self.extra_config
                   else "commitlog_sync: periodic\ncommitlog_sync_period: 10s\n" + self.extra_config)
            )
        return path

    def start(self, timeout=60):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([BIN, "--config", self.config_path(), *self.extra_args], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sibyl exited with {self.proc.returncode}: {self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sibyl did not start in {timeout}s: {self.log()}")

    def log(self, tail=4000):
        """The end of the node's standard output (all of it: tail=None)."""
        try:
            with open(self.log_path) as f:
                text = f.read()
                return text if tail is None else text[-tail:]
        except OSError:
            return ""

    def stop(self, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def nodetool(self, *args):
        """Runs `sibyl nodetool` against this node; returns its stdout."""
        p = subprocess.run([BIN, "nodetool", "-p", str(self.admin_port), *args], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"nodetool {' '.join(args)} failed: {p.stdout}{p.stderr}")
        return p.stdout

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self):
        """A clean stop (SIGTERM) and a start on the same port and data."""
        self.stop()
        return self.start()


class RemoteNode:
    """A server someone else runs (SIBYL_TARGET=host:port): it can't be restarted."""

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.data_dir = None

    def _cannot(self, *_args, **_kwargs):
        import pytest

        pytest.skip("the node under SIBYL_TARGET is not ours to kill or restart")

    kill9 = start = stop = restart = nodetool = _cannot


def connect_with_keyspace(node, keyspace):
    """A driver session on `node` with a fresh SimpleStrategy keyspace (RF 1)."""
    from cassandra.cluster import Cluster

    cluster = Cluster([node.host], port=node.port)
    session = cluster.connect()
    session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}")
    return cluster, session

"""Issue 21, item 1: an operator's cassandra.yaml. Every key Cassandra 5.0.4
takes is taken: used, or listed once at start as not acted on; a key
Cassandra refuses is refused in its words.

The keys are the fields of Cassandra 5.0.4's `Config` (and `@Replaces` old
names), read from its jar into crates/node/src/cassandra_keys.rs; the values
are those a running Cassandra 5.0.4 reports in `system_views.settings`
(tests/golden/cassandra_settings_5.0.4.json)."""
import json
import os
import re

from cassandra.cluster import Cluster

import goldens
from sibyl_node import ROOT, SibylNode

# written by SibylNode itself, with this node's own directories and ports
OWN = {"cluster_name", "listen_address", "rpc_address", "native_transport_port", "storage_port",
       "data_file_directories", "commitlog_directory", "commitlog_sync", "commitlog_sync_period",
       "hints_directory", "saved_caches_directory", "cdc_raw_directory", "local_system_data_file_directory",
       "metadata_directory", "seed_provider", "ssl_storage_port", "broadcast_address", "broadcast_rpc_address",
       "listen_interface", "rpc_interface", "admin_port"}

# pluggable classes, in Cassandra 5.0's form (system_views.settings leaves them out)
CLASSES = """authenticator:
  class_name: AllowAllAuthenticator
authorizer:
  class_name: AllowAllAuthorizer
role_manager:
  class_name: CassandraRoleManager
network_authorizer:
  class_name: AllowAllNetworkAuthorizer
cidr_authorizer:
  class_name: AllowAllCIDRAuthorizer
"""


def cassandra_fields():
    with open(os.path.join(ROOT, "crates", "node", "src", "cassandra_keys.rs")) as f:
        return re.findall(r'^    "(\w+)",$', f.read(), re.M)


def full_cassandra_yaml(node_dir):
    with open(os.path.join(goldens.GOLDEN, "cassandra_settings_5.0.4.json")) as f:
        settings = json.load(f)
    lines = []
    for key in cassandra_fields():
        value = settings.get(key)
        if key in OWN or value in (None, ""):
            continue
        if value in ("[]", "{}") or re.match(r"^[\w.:/+-]+$", value):
            lines.append(f"{key}: {value}")
        else:
            lines.append(f"{key}: {json.dumps(value)}")
    lines.append(f"hints_directory: {node_dir}/hints")
    return "\n".join(lines) + "\n" + CLASSES


def test_a_node_starts_with_every_key_cassandra_takes_and_warns_once_about_the_rest():
    n = SibylNode()
    text = full_cassandra_yaml(n.data_dir)
    n.extra_config = text
    assert text.count("\n") > 330, "the file holds every key with a value"
    n.start()
    try:
        c = Cluster([n.host], port=n.port)
        s = c.connect()
        assert s.execute("SELECT cluster_name FROM system.local").one().cluster_name == "test"
        c.shutdown()
        with open(n.log_path) as f:
            log = f.read()
        warnings = [l for l in log.splitlines() if "does not act on them" in l]
        assert len(warnings) == 1, warnings
        listed = warnings[0].split("does not act on them: ")[1].split(", ")
        # what Sibyl reads (num_tokens, memtable sizes, timeouts...) is not listed
        for read in ("num_tokens", "read_request_timeout", "concurrent_compactors", "endpoint_snitch"):
            assert read not in listed, read
        for ignored in ("concurrent_reads", "concurrent_writes", "default_secondary_index"):
            assert ignored in listed, ignored
        assert len(listed) > 200
    finally:
        n.stop()


def test_a_key_cassandra_refuses_stops_the_node_in_cassandras_words():
    n = SibylNode(extra_config="enable_materialized_views: false\nnot_a_setting: 1\nstart_rpc: false\n")
    try:
        n.start(timeout=20)
        raise AssertionError("the node started")
    except RuntimeError as e:
        assert "Invalid yaml. Please remove properties [not_a_setting, start_rpc] from your cassandra.yaml" in str(e)
    finally:
        n.stop()

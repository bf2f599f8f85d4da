"""Dropped columns stay dropped: values written before the drop never come
back when the column is added again, from memtables, SSTables, compaction
output or after a restart."""
from cassandra.cluster import Cluster
from sibyl_node import SibylNode, connect_with_keyspace


def test_old_values_of_a_dropped_column_never_reappear(tmp_path):
    n = SibylNode(data_dir=str(tmp_path)).start()
    try:
        c, s = connect_with_keyspace(n, "se")
        s.execute("CREATE TABLE se.t (k int PRIMARY KEY, v int, l list<int>)")
        for k in range(100):
            s.execute("INSERT INTO se.t (k, v, l) VALUES (%s, %s, [%s])", (k, k, k))
            if k == 49:
                n.nodetool("flush", "se", "t")  # half in an SSTable, half in the memtable
        s.execute("ALTER TABLE se.t DROP v")
        s.execute("ALTER TABLE se.t DROP l")
        s.execute("ALTER TABLE se.t ADD v int")
        s.execute("ALTER TABLE se.t ADD l list<int>")
        s.execute("INSERT INTO se.t (k, v) VALUES (7, 700)")

        def check():
            rows = {r.k: (r.v, r.l) for r in s.execute("SELECT k, v, l FROM se.t")}
            assert len(rows) == 100
            assert rows[7] == (700, None)
            assert all(v == (None, None) for k, v in rows.items() if k != 7), rows

        check()
        n.nodetool("flush", "se", "t")
        n.nodetool("compact", "se", "t")
        check()
        c.shutdown()
        n.stop()
        n.start()
        c = Cluster([n.host], port=n.port)
        s = c.connect()
        check()
        c.shutdown()
    finally:
        n.stop()

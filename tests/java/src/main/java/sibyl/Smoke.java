package sibyl;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import com.datastax.oss.driver.api.core.metadata.schema.TableMetadata;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;

/**
 * Smoke test with the Java driver 4.x against SIBYL_HOST:SIBYL_PORT (scripts/smoke_java.sh HOST PORT):
 * connect, CREATE KEYSPACE/TABLE, prepared insert and select, paging over 1000 rows. Exits non-zero on failure.
 */
public class Smoke {
  static void check(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  public static void main(String[] args) {
    String host = System.getenv("SIBYL_HOST");
    int port = Integer.parseInt(System.getenv("SIBYL_PORT"));
    try (CqlSession s = CqlSession.builder()
        .addContactPoint(new InetSocketAddress(host, port))
        .withLocalDatacenter(System.getenv().getOrDefault("SIBYL_DC", "datacenter1"))
        .withConfigLoader(DriverConfigLoader.programmaticBuilder()
            // DDL on a busy 2-core machine can take longer than the 2 s default
            .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(30))
            .build())
        .build()) {
      Row local = s.execute("SELECT release_version, partitioner FROM system.local").one();
      check(local.getString("partitioner").equals("org.apache.cassandra.dht.Murmur3Partitioner"), "partitioner");
      String ks = "java_smoke_" + (System.nanoTime() % 1000000000L);
      s.execute("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
      try {
        s.execute("CREATE TABLE " + ks + ".t (k int, c int, v text, PRIMARY KEY (k, c))");
        TableMetadata t = s.getMetadata().getKeyspace(ks).flatMap(k -> k.getTable("t"))
            .orElseThrow(() -> new AssertionError("table not in driver metadata"));
        check(t.getPartitionKey().size() == 1 && t.getClusteringColumns().size() == 1, "table keys in metadata");

        PreparedStatement ins = s.prepare("INSERT INTO " + ks + ".t (k, c, v) VALUES (?, ?, ?)");
        for (int i = 0; i < 1000; i++) {
          s.execute(ins.bind(1, i, "v" + i));
        }
        PreparedStatement one = s.prepare("SELECT v FROM " + ks + ".t WHERE k = ? AND c = ?");
        check(s.execute(one.bind(1, 500)).one().getString("v").equals("v500"), "prepared select");

        // automatic paging: every row once, in clustering order
        PreparedStatement sel = s.prepare("SELECT c, v FROM " + ks + ".t WHERE k = ?");
        ResultSet rs = s.execute(sel.bind(1).setPageSize(100));
        check(rs.getAvailableWithoutFetching() == 100 && !rs.isFullyFetched(), "first page holds 100 rows");
        int n = 0;
        for (Row r : rs) {
          check(r.getInt("c") == n && r.getString("v").equals("v" + n), "row " + n);
          n++;
        }
        check(n == 1000, "paged " + n + " rows, want 1000");

        // manual paging with the paging state
        ByteBuffer state = null;
        int pages = 0;
        int rows = 0;
        do {
          ResultSet page = s.execute(sel.bind(1).setPageSize(100).setPagingState(state));
          int inPage = page.getAvailableWithoutFetching();
          for (int i = 0; i < inPage; i++) {
            check(page.one().getInt("c") == rows, "manual paging row " + rows);
            rows++;
          }
          if (inPage > 0) {
            pages++;
          }
          state = page.getExecutionInfo().getPagingState();
        } while (state != null);
        check(pages == 10 && rows == 1000, "manual paging: " + pages + " pages, " + rows + " rows");
      } finally {
        s.execute("DROP KEYSPACE IF EXISTS " + ks);
      }
      // against a cluster (SIBYL_EXPECT_NODES=N): every node discovered from
      // one contact point, up, in its data center
      String expect = System.getenv("SIBYL_EXPECT_NODES");
      if (expect != null) {
        String dc = System.getenv().getOrDefault("SIBYL_DC", "datacenter1");
        var nodes = s.getMetadata().getNodes().values();
        check(nodes.size() == Integer.parseInt(expect), "discovered " + nodes.size() + " nodes, want " + expect);
        for (var node : nodes) {
          check(node.getState() == com.datastax.oss.driver.api.core.metadata.NodeState.UP, node + " up");
          check(dc.equals(node.getDatacenter()), node + " in " + dc);
        }
        System.out.println("java driver: discovered " + nodes.size() + " nodes, all up");
      }
      System.out.println("java driver " + local.getString("release_version") + " smoke: 1 passed, 0 failed");
    }
  }
}

package sibyl;

import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import com.datastax.oss.driver.api.core.cql.ResultSet;
import com.datastax.oss.driver.api.core.cql.Row;
import java.net.InetSocketAddress;

/** Smoke test with the Java driver 4.x against SIBYL_HOST:SIBYL_PORT. Exits non-zero on failure. */
public class Smoke {
  public static void main(String[] args) {
    String host = System.getenv("SIBYL_HOST");
    int port = Integer.parseInt(System.getenv("SIBYL_PORT"));
    try (CqlSession s = CqlSession.builder()
        .addContactPoint(new InetSocketAddress(host, port))
        .withLocalDatacenter("datacenter1")
        .build()) {
      String ks = "java_" + (System.currentTimeMillis() % 1000000);
      s.execute("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}");
      s.execute("CREATE TABLE " + ks + ".t (k int, c int, v text, PRIMARY KEY (k, c))");
      PreparedStatement ins = s.prepare("INSERT INTO " + ks + ".t (k, c, v) VALUES (?, ?, ?)");
      for (int i = 0; i < 1000; i++) {
        s.execute(ins.bind(1, i, "v" + i));
      }
      PreparedStatement sel = s.prepare("SELECT c, v FROM " + ks + ".t WHERE k = ?");
      ResultSet rs = s.execute(sel.bind(1).setPageSize(100));
      int n = 0;
      for (Row r : rs) {
        if (r.getInt("c") != n || !r.getString("v").equals("v" + n)) {
          throw new AssertionError("row " + n + ": " + r.getInt("c") + " " + r.getString("v"));
        }
        n++;
      }
      if (n != 1000) {
        throw new AssertionError("paged " + n + " rows, want 1000");
      }
      s.execute("DROP KEYSPACE " + ks);
      System.out.println("java driver smoke: 1 passed, 0 failed");
    }
  }
}

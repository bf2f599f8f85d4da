// Smoke test with gocql against a running node: SIBYL_HOST, SIBYL_PORT
// (scripts/smoke_go.sh HOST PORT sets them).
package smoke

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

func TestGocqlConnectDDLPreparedAndPaging(t *testing.T) {
	host := os.Getenv("SIBYL_HOST")
	port, _ := strconv.Atoi(os.Getenv("SIBYL_PORT"))
	if host == "" || port == 0 {
		t.Fatal("SIBYL_HOST and SIBYL_PORT must be set (use scripts/smoke_go.sh HOST PORT)")
	}
	cl := gocql.NewCluster(host)
	cl.Port = port
	cl.Timeout = 20 * time.Second
	cl.ConnectTimeout = 10 * time.Second
	cl.Consistency = gocql.Quorum
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()

	var release, partitioner string
	if err := s.Query("SELECT release_version, partitioner FROM system.local").Scan(&release, &partitioner); err != nil {
		t.Fatalf("system.local: %v", err)
	}
	if partitioner != "org.apache.cassandra.dht.Murmur3Partitioner" {
		t.Fatalf("partitioner %q", partitioner)
	}

	ks := fmt.Sprintf("go_smoke_%d", time.Now().UnixNano()%1000000000)
	if err := s.Query("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	defer s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
	if err := s.Query("CREATE TABLE " + ks + ".t (k int, c int, v text, PRIMARY KEY (k, c))").Exec(); err != nil {
		t.Fatalf("create table: %v", err)
	}

	// gocql prepares every query with bound values
	for i := 0; i < 1000; i++ {
		if err := s.Query("INSERT INTO "+ks+".t (k, c, v) VALUES (?, ?, ?)", 1, i, fmt.Sprintf("v%d", i)).Exec(); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	var v string
	if err := s.Query("SELECT v FROM "+ks+".t WHERE k = ? AND c = ?", 1, 500).Scan(&v); err != nil || v != "v500" {
		t.Fatalf("prepared select: %q %v", v, err)
	}

	// automatic paging: every row once, in clustering order
	iter := s.Query("SELECT c, v FROM "+ks+".t WHERE k = ?", 1).PageSize(100).Iter()
	var c, n int
	for iter.Scan(&c, &v) {
		if c != n || v != fmt.Sprintf("v%d", n) {
			t.Fatalf("row %d: got %d %s", n, c, v)
		}
		n++
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("iter: %v", err)
	}
	if n != 1000 {
		t.Fatalf("paged %d rows, want 1000", n)
	}

	// manual paging with the paging state: 10 pages of 100
	var state []byte
	pages, rows := 0, 0
	for {
		it := s.Query("SELECT c FROM "+ks+".t WHERE k = ?", 1).PageSize(100).PageState(state).Iter()
		got := it.NumRows()
		for it.Scan(&c) {
			if c != rows {
				t.Fatalf("page %d: row %d is c=%d", pages, rows, c)
			}
			rows++
		}
		state = it.PageState()
		if err := it.Close(); err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if got > 0 {
			pages++
		}
		if len(state) == 0 {
			break
		}
	}
	if pages != 10 || rows != 1000 {
		t.Fatalf("manual paging: %d pages, %d rows; want 10 and 1000", pages, rows)
	}
	t.Logf("gocql against %s (release_version %s): ok", host, release)
}

// Against a cluster (SIBYL_EXPECT_NODES=N, SIBYL_DC): gocql discovers every
// node from one contact point, with its data center, and keeps working with
// the token-aware policy.
func TestGocqlDiscoversEveryNodeOfACluster(t *testing.T) {
	want, _ := strconv.Atoi(os.Getenv("SIBYL_EXPECT_NODES"))
	if want == 0 {
		t.Skip("SIBYL_EXPECT_NODES not set (not a cluster)")
	}
	host := os.Getenv("SIBYL_HOST")
	port, _ := strconv.Atoi(os.Getenv("SIBYL_PORT"))
	dc := os.Getenv("SIBYL_DC")
	var mu sync.Mutex
	seen := map[string]string{}
	cl := gocql.NewCluster(host)
	cl.Port = port
	cl.Timeout = 20 * time.Second
	cl.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.DCAwareRoundRobinPolicy(dc))
	cl.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
		mu.Lock()
		defer mu.Unlock()
		seen[h.ConnectAddress().String()] = h.DataCenter()
		return true
	})
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	if err := s.Query(fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS go_ring WITH replication = {'class': 'NetworkTopologyStrategy', '%s': 2}", dc)).Exec(); err != nil {
		t.Fatalf("keyspace: %v", err)
	}
	if err := s.Query("CREATE TABLE IF NOT EXISTS go_ring.t (k text PRIMARY KEY, v int)").Exec(); err != nil {
		t.Fatalf("table: %v", err)
	}
	for i := 0; i < 50; i++ {
		if err := s.Query("INSERT INTO go_ring.t (k, v) VALUES (?, ?)", fmt.Sprint(i), i).Exec(); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	var n int
	if err := s.Query("SELECT count(*) FROM go_ring.t").Scan(&n); err != nil || n != 50 {
		t.Fatalf("count %d, %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != want {
		t.Fatalf("gocql saw %d nodes (%v), want %d", len(seen), seen, want)
	}
	for a, d := range seen {
		if d != dc {
			t.Fatalf("%s in data center %q, want %q", a, d, dc)
		}
	}
}

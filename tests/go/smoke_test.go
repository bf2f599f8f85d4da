// Smoke test with gocql against a running node: SIBYL_HOST, SIBYL_PORT.
package smoke

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gocql/gocql"
)

func TestGocqlSmoke(t *testing.T) {
	host := os.Getenv("SIBYL_HOST")
	port, _ := strconv.Atoi(os.Getenv("SIBYL_PORT"))
	if host == "" || port == 0 {
		t.Skip("SIBYL_HOST and SIBYL_PORT not set")
	}
	cl := gocql.NewCluster(host)
	cl.Port = port
	cl.Timeout = 10 * time.Second
	cl.ConnectTimeout = 10 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer s.Close()
	ks := fmt.Sprintf("go_%d", time.Now().UnixNano()%1000000)
	if err := s.Query("CREATE KEYSPACE " + ks + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").Exec(); err != nil {
		t.Fatalf("create keyspace: %v", err)
	}
	if err := s.Query("CREATE TABLE " + ks + ".t (k int, c int, v text, PRIMARY KEY (k, c))").Exec(); err != nil {
		t.Fatalf("create table: %v", err)
	}
	for i := 0; i < 1000; i++ {
		if err := s.Query("INSERT INTO "+ks+".t (k, c, v) VALUES (?, ?, ?)", 1, i, fmt.Sprintf("v%d", i)).Exec(); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	iter := s.Query("SELECT c, v FROM "+ks+".t WHERE k = ?", 1).PageSize(100).Iter()
	var c int
	var v string
	n := 0
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
	if err := s.Query("DROP KEYSPACE " + ks).Exec(); err != nil {
		t.Fatalf("drop: %v", err)
	}
}
